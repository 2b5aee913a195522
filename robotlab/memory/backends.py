"""Where a memory's custom keys live: the :class:`Backend` protocol, the dict backend, and the choice.

:func:`create_backend` picks one for ``Memory(backend=...)``: ``"hash"`` is a local ``dict``
(:class:`HashBackend`), ``"redis"`` is :class:`~robotlab.memory.redis_backend.RedisBackend`,
``"auto"`` uses Redis only when a URL is configured and the server answers. The ``redis``
package is imported only when a Redis backend is created.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigurationError
from .changes import ChangeListener

__all__ = ["Backend", "BackendKind", "HashBackend", "create_backend"]

logger = logging.getLogger("robotlab.memory")

BackendKind = Literal["auto", "hash", "redis"]


class Backend(Protocol):
    """What :class:`~robotlab.memory.Memory` needs from a storage backend (custom keys only)."""

    def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` when the key exists, else ``(False, None)``."""

    def swap(self, key: str, value: object, *, writer: str | None = None) -> tuple[bool, Any]:
        """Store ``value`` (a reactive write by ``writer``); return the old value as :meth:`lookup` would."""

    def put(self, key: str, value: object) -> None:
        """Store ``value`` silently, without reading the old one."""

    def contains(self, key: str) -> bool:
        """Whether the key exists."""

    def delete(self, key: str) -> Any:
        """Remove the key and return its value (``None`` when missing)."""

    def keys(self) -> list[str]:
        """Every stored key."""

    def clear(self) -> None:
        """Remove every key."""

    def listen(self, listener: ChangeListener) -> None:
        """Start calling the bound method ``listener`` with the writes other processes make (idempotent)."""

    def close(self) -> None:
        """Stop calling the listener given to :meth:`listen`."""


class HashBackend:
    """Custom keys in a ``dict`` (insertion order); values are stored as given, not copied.

    Nothing outside the process sees it, so :meth:`listen` and :meth:`close` do nothing.
    """

    def __init__(self) -> None:
        self._store: dict[str, Any] = {}

    def lookup(self, key: str) -> tuple[bool, Any]:
        """``(True, value)`` when the key exists, else ``(False, None)``."""
        if key in self._store:
            return True, self._store[key]
        return False, None

    def swap(self, key: str, value: object, *, writer: str | None = None) -> tuple[bool, Any]:
        """Store ``value`` and return what was there before, as :meth:`lookup` would."""
        found = key in self._store
        old = self._store.get(key)
        self._store[key] = value
        return found, old

    def put(self, key: str, value: object) -> None:
        """Store ``value``."""
        self._store[key] = value

    def contains(self, key: str) -> bool:
        """Whether the key exists."""
        return key in self._store

    def delete(self, key: str) -> Any:
        """Remove the key and return its value (``None`` when missing)."""
        return self._store.pop(key, None)

    def keys(self) -> list[str]:
        """The keys in insertion order."""
        return list(self._store)

    def clear(self) -> None:
        """Remove every key."""
        self._store.clear()

    def listen(self, listener: ChangeListener) -> None:
        """Nothing: no other process writes here."""

    def close(self) -> None:
        """Nothing to release."""


def configured_redis_url() -> str | None:
    """``config.redis_url`` (``ROBOT_LAB_REDIS_URL``), else ``REDIS_URL``, else ``None``."""
    from ..config import get_config

    return get_config().redis_url or os.environ.get("REDIS_URL") or None


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for logs and errors)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def create_backend(kind: str, *, redis_url: str | None = None, namespace: str | None = None,
                   network_name: str | None = None, ttl: float | None = None) -> Backend:
    """The backend for ``Memory(backend=kind, ...)``.

    ``redis_url``, ``namespace`` and ``ttl`` ask for Redis: with ``"auto"`` they make Redis
    required, as ``"redis"`` does.

    Raises:
        ValueError: an unknown ``kind``, or Redis options with ``"hash"``.
        ConfigurationError: Redis is required and cannot be used.
    """
    redis_options = redis_url is not None or namespace is not None or ttl is not None
    if kind == "hash":
        if redis_options:
            raise ValueError("redis_url=, namespace= and ttl= need the Redis backend: "
                             "use backend='redis' (or 'auto'), or drop them")
        return HashBackend()
    if kind not in ("auto", "redis"):
        raise ValueError(f"Unknown memory backend: {kind!r} (expected 'auto', 'hash' or 'redis')")
    from .redis_backend import DEFAULT_REDIS_URL, RedisBackend

    url = redis_url or configured_redis_url()
    if kind == "auto" and not redis_options:
        if url is None:
            return HashBackend()
        try:
            return RedisBackend(url, network_name=network_name)
        except Exception as exc:
            logger.warning("Redis at %s is unavailable (%s); memory falls back to a local dict",
                           redact(url), exc)
            return HashBackend()
    url = url or DEFAULT_REDIS_URL
    try:
        return RedisBackend(url, namespace=namespace, network_name=network_name, ttl=ttl)
    except (ConfigurationError, ValueError):
        raise
    except Exception as exc:
        raise ConfigurationError(f"Cannot use Redis at {redact(url)} for memory: {exc}") from exc
