"""The Redis storage behind :class:`robotlab.memory.Memory` (``backend="redis"``).

Each memory owns a namespace, ``robot_lab:memory:<name>`` (``<name>`` is a new uuid unless the
memory was given ``namespace=``), and stores every custom key as JSON under
``robot_lab:memory:<name>:<key>``. Values therefore come back JSON round-tripped: tuples become
lists and non-str dict keys become strings; an object with a ``to_dict()`` method is stored as
that dict. The ``redis`` package is imported only when a Redis backend is created, and clients
are shared per URL (redis-py clients are thread-safe and pool their connections).

A memory given ``namespace=`` is shared: every reactive write (:meth:`RedisBackend.swap`) also
publishes the change on the channel ``robot_lab:memory:<name>:changes``, in the same server-side
script as the write, so processes sharing the namespace hear of it in write order
(:mod:`robotlab.memory.change_feed`). A private memory (a uuid nobody else knows) neither publishes
nor listens.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
import weakref
from collections.abc import Iterator
from typing import Any

from ..errors import DependencyError
from .change_feed import ChangeFeed, change_feed, message_prefix
from .changes import ChangeListener

__all__ = ["DEFAULT_REDIS_URL", "KEY_PREFIX", "RedisBackend", "redis_client"]

#: Prefix of every key a memory writes.
KEY_PREFIX = "robot_lab:memory"

#: Used by an explicit ``backend="redis"`` when no URL is configured (as redis-rb's default).
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

_NAMESPACE = re.compile(r"[A-Za-z0-9_.-]{1,200}")

# Read the old value, write the new one (with an optional expiry) and publish the change, atomically.
_SWAP_SCRIPT = """
local old = redis.call('GET', KEYS[1])
if ARGV[2] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
redis.call('PUBLISH', ARGV[3], ARGV[4] .. (old or 'null') .. '}')
return old
"""

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
                    "the Redis memory backend requires the redis package: pip install 'robotlab-py[django]' "
                    "or pip install redis"
                ) from exc
            client = redis.Redis.from_url(url, decode_responses=True)
            _clients[url] = client
        return client


def _encode_default(value: object) -> Any:
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not _NAMESPACE.fullmatch(namespace):
        raise ValueError(f"Invalid memory namespace {namespace!r}: use 1-200 letters, digits, '_', '.' or '-' "
                         "(a turn id or a uuid, say)")
    return namespace


class RedisBackend:
    """Key-value storage in Redis, one JSON document per key, shared by every process that names it.

    Args:
        url: a ``redis://`` URL.
        client: an existing ``redis.Redis`` client (with ``decode_responses=True``) to use instead.
        namespace: the name that processes sharing this memory agree on (a turn id, say); a new
            uuid when ``None`` (a private memory).
        network_name: recorded in the changes this backend publishes.
        ttl: seconds each key lives after its last write (``None``: until deleted).

    Raises:
        DependencyError: the ``redis`` package is not installed.
        ValueError: an invalid ``namespace`` or ``ttl``.
        redis.exceptions.ConnectionError: the server cannot be reached (checked with ``PING``).
    """

    def __init__(self, url: str, *, client: Any = None, namespace: str | None = None,
                 network_name: str | None = None, ttl: float | None = None) -> None:
        if ttl is not None and not (isinstance(ttl, int | float) and ttl > 0):
            raise ValueError(f"ttl must be a positive number of seconds or None, got {ttl!r}")
        self.url = url
        self.client = client if client is not None else redis_client(url)
        name = str(uuid.uuid4()) if namespace is None else _check_namespace(namespace)
        #: Whether other processes may name this namespace (it was given): only then are writes published.
        self.shared = namespace is not None
        self.namespace = f"{KEY_PREFIX}:{name}"
        self.channel = f"{self.namespace}:changes"
        self._origin = uuid.uuid4().hex
        self.network_name = network_name
        self.ttl = ttl
        self._expiry = "" if ttl is None else str(max(1, int(ttl * 1000)))
        self._swap = self.client.register_script(_SWAP_SCRIPT)
        self._feed: ChangeFeed | None = None
        self._stop_listening: weakref.finalize[Any, Any] | None = None
        self.client.ping()

    @property
    def origin(self) -> str:
        """This backend's id in the changes it publishes (a forked child's copy gets its own)."""
        return f"{self._origin}-{os.getpid()}"

    def _key(self, key: str) -> str:
        return f"{self.namespace}:{key}"

    @staticmethod
    def encode(key: str, value: object) -> str:
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

    def swap(self, key: str, value: object, *, writer: str | None = None) -> tuple[bool, Any]:
        """Store ``value`` and return what was there before, as :meth:`lookup` would; publish the change when shared."""
        encoded = self.encode(key, value)
        if self.shared:
            prefix = message_prefix(self.origin, key, encoded, writer=writer, network_name=self.network_name)
            old = self._swap(keys=[self._key(key)], args=[encoded, self._expiry, self.channel, prefix])
        else:
            pipe = self.client.pipeline(transaction=True)
            pipe.get(self._key(key))
            pipe.set(self._key(key), encoded, px=int(self._expiry) if self._expiry else None)
            old, _ = pipe.execute()
        return (False, None) if old is None else (True, json.loads(old))

    def put(self, key: str, value: object) -> None:
        """Store ``value`` without reading the old one (and without publishing)."""
        self.client.set(self._key(key), self.encode(key, value), px=int(self._expiry) if self._expiry else None)

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
        keys: Iterator[str] = self.client.scan_iter(match=f"{self.namespace}:*", count=500)
        return keys

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

    def listen(self, listener: ChangeListener) -> None:
        """Call the bound method ``listener`` with every change another memory of this namespace publishes.

        Returns once Redis has confirmed the subscription, so a write made after this call is
        heard. Idempotent; the feed holds ``listener`` weakly. Changes this backend published
        itself are not passed back. Nothing for a private namespace (nobody else writes there).
        """
        if not self.shared:
            return
        feed = change_feed(self.url, self.client)
        if self._feed is feed:
            return
        if self._stop_listening is not None:  # listening in the parent before a fork: leave its feed alone
            self._stop_listening.detach()
        feed.add(self.channel, self.origin, listener)
        self._feed = feed
        self._stop_listening = weakref.finalize(self, feed.remove, self.channel, self.origin)
        self._stop_listening.atexit = False

    def close(self) -> None:
        """Stop listening (see :meth:`listen`); the data stays."""
        if self._stop_listening is not None:
            self._stop_listening()
        self._feed = self._stop_listening = None
