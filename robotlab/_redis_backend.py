"""The Redis storage behind :class:`robotlab.memory.Memory` (``backend="redis"``).

Each memory owns a namespace, ``robot_lab:memory:<uuid>``, and stores every custom key as
JSON under ``robot_lab:memory:<uuid>:<key>``. Values therefore come back JSON round-tripped:
tuples become lists and non-str dict keys become strings; an object with a ``to_dict()``
method is stored as that dict. The ``redis`` package is imported only when a Redis backend is
created, and clients are shared per URL (redis-py clients are thread-safe and pool their
connections).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from .errors import DependencyError

__all__ = ["DEFAULT_REDIS_URL", "KEY_PREFIX", "RedisBackend", "redis_client"]

#: Prefix of every key a memory writes.
KEY_PREFIX = "robot_lab:memory"

#: Used by an explicit ``backend="redis"`` when no URL is configured (as redis-rb's default).
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

_clients_lock = threading.Lock()
_clients: dict[str, Any] = {}


def redis_client(url: str) -> Any:
    """The shared ``redis.Redis`` client for ``url`` (created on first use; never connects here).

    Raises:
        DependencyError: the ``redis`` package is not installed.
    """
    with _clients_lock:
        client = _clients.get(url)
        if client is None:
            try:
                import redis
            except ImportError as exc:  # pragma: no cover - redis is installed with the django extra
                raise DependencyError(
                    "the Redis memory backend requires the redis package: pip install 'robotlab[django]' "
                    "or pip install redis"
                ) from exc
            client = redis.Redis.from_url(url, decode_responses=True)
            _clients[url] = client
        return client


def _encode_default(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class RedisBackend:
    """Key-value storage in Redis, one JSON document per key.

    Args:
        url: a ``redis://`` URL.
        client: an existing ``redis.Redis`` client (with ``decode_responses=True``) to use instead.

    Raises:
        DependencyError: the ``redis`` package is not installed.
        redis.exceptions.ConnectionError: the server cannot be reached (checked with ``PING``).
    """

    def __init__(self, url: str, *, client: Any = None) -> None:
        self.url = url
        self.client = client if client is not None else redis_client(url)
        self.namespace = f"{KEY_PREFIX}:{uuid.uuid4()}"
        self.client.ping()

    def _key(self, key: str) -> str:
        return f"{self.namespace}:{key}"

    @staticmethod
    def encode(key: str, value: Any) -> str:
        """``value`` as JSON text.

        Raises:
            TypeError: the value cannot be stored as JSON.
        """
        try:
            return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_encode_default)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"Cannot store {key!r} in the Redis memory backend: {exc}") from exc

    def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` when the key exists, else ``(False, None)``."""
        raw = self.client.get(self._key(key))
        return (False, None) if raw is None else (True, json.loads(raw))

    def swap(self, key: str, value: Any) -> tuple[bool, Any]:
        """Store ``value`` and return what was there before, as :meth:`lookup` would."""
        encoded = self.encode(key, value)
        pipe = self.client.pipeline(transaction=True)
        pipe.get(self._key(key))
        pipe.set(self._key(key), encoded)
        old, _ = pipe.execute()
        return (False, None) if old is None else (True, json.loads(old))

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` without reading the old one."""
        self.client.set(self._key(key), self.encode(key, value))

    def contains(self, key: str) -> bool:
        """Whether the key exists."""
        return bool(self.client.exists(self._key(key)))

    def delete(self, key: str) -> Any:
        """Remove the key and return its value (``None`` when it was missing)."""
        pipe = self.client.pipeline(transaction=True)
        pipe.get(self._key(key))
        pipe.delete(self._key(key))
        old, _ = pipe.execute()
        return None if old is None else json.loads(old)

    def _scan(self) -> Iterator[str]:
        return self.client.scan_iter(match=f"{self.namespace}:*", count=500)

    def keys(self) -> list[str]:
        """Every stored key, sorted (Redis keeps no insertion order)."""
        start = len(self.namespace) + 1
        return sorted(name[start:] for name in self._scan())

    def clear(self) -> None:
        """Remove every key of this namespace."""
        batch: list[str] = []
        for name in self._scan():
            batch.append(name)
            if len(batch) >= 500:
                self.client.delete(*batch)
                batch.clear()
        if batch:
            self.client.delete(*batch)
