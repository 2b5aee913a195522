"""Shared reactive memory: :class:`Memory`, :class:`StateProxy`, :class:`MemoryChange`, :class:`Waiter`.

A :class:`Memory` is the key-value store a robot keeps between runs and that the robots of a
network share. Robots hand values to each other through it: one writes with :meth:`Memory.set`,
another reads with :meth:`Memory.get` (``wait=`` blocks until the key exists) or
``await`` :meth:`Memory.aget`, and subscribers are told of every change::

    memory = robotlab.create_memory(data={"tier": "gold"})
    memory.subscribe("sentiment", callback=lambda change: print(change.key, change.value))
    memory.set("sentiment", {"score": 0.8})   # prints: sentiment {'score': 0.8}
    memory.get("sentiment", wait=5)            # -> {'score': 0.8}
    memory.get("entities", wait=0.5)           # AwaitTimeout: Timeout waiting for :entities after 0.5 seconds

Keys are ``str`` (anything else raises ``TypeError``). Five keys are reserved and have their own
accessors (:data:`RESERVED_KEYS`): ``data`` (a :class:`StateProxy`), ``results`` (robot results),
``messages`` (conversation messages), ``session_id`` and ``cache``. Only :meth:`Memory.set` (and
item assignment or :meth:`Memory.merge` on non-reserved keys, which call it) notifies
subscribers and wakes waiters; writes through ``memory.data`` and to reserved keys are silent.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy as _copy
import inspect
import json
import logging
import os
import re
import threading
import uuid
import warnings
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeVar, overload
from urllib.parse import urlsplit, urlunsplit

from .errors import AwaitTimeout, ConfigurationError
from .messages import Message, _compact, _dumps, _iso8601
from .messages import coerce_message as _message
from .result import RobotResult
from .text.document_store import DocumentStore

__all__ = [
    "RESERVED_KEYS",
    "TIMEOUT",
    "Memory",
    "MemoryChange",
    "ResponseCache",
    "StateProxy",
    "Waiter",
    "create_memory",
]

logger = logging.getLogger("robotlab.memory")

#: Keys with their own accessors; they always exist and cannot be deleted.
RESERVED_KEYS: tuple[str, ...] = ("data", "results", "messages", "session_id", "cache")

#: What :meth:`Waiter.wait` returns when it gives up (Ruby's ``:timeout``).
TIMEOUT: Literal["timeout"] = "timeout"

Backend = Literal["auto", "hash", "redis"]
Callback = Callable[["MemoryChange"], Any]
F = TypeVar("F", bound=Callable[..., Any])

_UNSET: Any = object()


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise TypeError(f"Memory keys must be str, got {type(key).__name__}: {key!r}")
    return key


def _wait_mode(wait: object) -> tuple[bool, float | None]:
    """``(should_wait, timeout)``: ``False``/``None`` never wait, ``True`` waits forever, a number waits."""
    if wait is None or wait is False:
        return False, None
    if wait is True:
        return True, None
    if isinstance(wait, int | float):
        return True, wait
    raise TypeError(f"wait must be True, False, None or a number of seconds, got {wait!r}")


def _timeout_error(key: str, timeout: float | None) -> AwaitTimeout:
    return AwaitTimeout(f"Timeout waiting for :{key} after {timeout} seconds")


# --------------------------------------------------------------------------------------------
# Waiter
# --------------------------------------------------------------------------------------------


class Waiter:
    """A one-shot signal that threads block on (the primitive behind ``memory.get(key, wait=...)``).

    Any number of threads may :meth:`wait` on one waiter; :meth:`signal` wakes them all with
    the value. RobotLab builds it on a pipe so it yields to Ruby's fiber scheduler; here it is a
    ``threading.Condition``, and event-loop code uses :meth:`Memory.aget` instead.
    """

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._value: Any = None
        self._signaled = False
        self._closed = False

    def wait(self, timeout: float | None = None) -> Any:
        """Block until signaled and return the value, or return :data:`TIMEOUT` (``"timeout"``).

        ``None`` waits forever. Returns at once when already signaled. A closed waiter that was
        never signaled returns ``"timeout"`` at once (as RobotLab's closed pipe does). A signaled
        value that is itself the string ``"timeout"`` is indistinguishable; check
        :attr:`is_signaled` when that matters.
        """
        with self._condition:
            if not (self._signaled or self._closed):
                self._condition.wait_for(lambda: self._signaled or self._closed, timeout)
            return self._value if self._signaled else TIMEOUT

    def signal(self, value: Any) -> None:
        """Store ``value`` and wake every waiting thread (a later signal replaces the value)."""
        with self._condition:
            self._value = value
            self._signaled = True
            self._condition.notify_all()

    @property
    def is_signaled(self) -> bool:
        """Whether :meth:`signal` has been called."""
        return self._signaled

    def close(self) -> None:
        """Release the waiter: threads still waiting (and later waits) return ``"timeout"``."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()


class _AsyncWaiter:
    """A waiter for :meth:`Memory.aget`: resolves a future on its own loop from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()

    def _resolve(self, value: Any) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def signal(self, value: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._resolve, value)
        except RuntimeError:  # the loop is closed; nobody is waiting any more
            pass


# --------------------------------------------------------------------------------------------
# MemoryChange
# --------------------------------------------------------------------------------------------


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class MemoryChange:
    """One change of a memory key, as given to subscription callbacks.

    Attributes:
        key: the key that changed.
        value: the new value.
        previous: the value before (``None`` when the key was created).
        writer: the robot that wrote it (``memory.current_writer`` at the time), if any.
        network_name: the network owning the memory, if any.
        timestamp: when it changed (an aware ``datetime``; defaults to now, UTC; a naive time is
            taken as UTC).
        correlation_id: an optional id for tracing.
    """

    key: str
    value: Any
    previous: Any = None
    writer: str | None = None
    network_name: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    correlation_id: str | None = None

    def __post_init__(self) -> None:
        moment: Any = self.timestamp
        if moment is None:
            moment = datetime.now(UTC)
        elif isinstance(moment, str):
            moment = datetime.fromisoformat(moment)
        object.__setattr__(self, "timestamp", _utc(moment))

    @property
    def is_created(self) -> bool:
        """A new value where there was none (``previous`` is ``None``, ``value`` is not)."""
        return self.previous is None and self.value is not None

    @property
    def is_updated(self) -> bool:
        """An existing value replaced (neither ``previous`` nor ``value`` is ``None``)."""
        return self.previous is not None and self.value is not None

    @property
    def is_deleted(self) -> bool:
        """A value removed (``value`` is ``None``, ``previous`` is not)."""
        return self.value is None and self.previous is not None

    def to_dict(self) -> dict[str, Any]:
        """The fields with ``None`` dropped; ``timestamp`` as ISO 8601 (seconds, with offset)."""
        return _compact(
            {
                "key": self.key,
                "value": self.value,
                "previous": self.previous,
                "writer": self.writer,
                "network_name": self.network_name,
                "timestamp": _iso8601(self.timestamp),
                "correlation_id": self.correlation_id,
            }
        )

    def to_json(self) -> str:
        """:meth:`to_dict` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryChange:
        """Rebuild a change from :meth:`to_dict` output (a missing timestamp becomes now)."""
        timestamp = data.get("timestamp")
        return cls(
            key=data["key"],
            value=data.get("value"),
            previous=data.get("previous"),
            writer=data.get("writer"),
            network_name=data.get("network_name"),
            timestamp=datetime.fromisoformat(timestamp) if timestamp else datetime.now(UTC),
            correlation_id=data.get("correlation_id"),
        )


# --------------------------------------------------------------------------------------------
# StateProxy
# --------------------------------------------------------------------------------------------


class StateProxy(MutableMapping[str, Any]):
    """A ``str``-keyed mapping with attribute access and an optional change callback.

    ``memory.data`` is one. ``proxy["tier"]`` and ``proxy.tier`` read a key (a missing key raises
    ``KeyError`` and ``AttributeError`` respectively; ``proxy.get("tier")`` gives ``None``);
    ``proxy["tier"] = "gold"`` and ``proxy.tier = "gold"`` write one. Method names (``keys``,
    ``items``, ...) are read as the methods, so use item access for such keys.

    Args:
        data: the initial contents (copied; keys must be ``str``).
        on_change: called as ``on_change(key, old, new)`` after a write that changes the value
            (``old`` is ``None`` for a new key; writing an equal value calls nothing; deleting
            calls nothing).
    """

    _data: dict[str, Any]
    _on_change: Callable[[str, Any, Any], Any] | None

    def __init__(self, data: Mapping[str, Any] | None = None, *,
                 on_change: Callable[[str, Any, Any], Any] | None = None) -> None:
        object.__setattr__(self, "_data", {})
        object.__setattr__(self, "_on_change", on_change)
        for key, value in (data or {}).items():
            self._data[_check_key(key)] = value

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        _check_key(key)
        old = self._data.get(key)
        self._data[key] = value
        if self._on_change is not None and not (old is value or old == value):
            self._on_change(key, old, value)

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            data = self.__dict__.get("_data", {})
            if name in data:
                return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self[name] = value

    def __delattr__(self, name: str) -> None:
        if name.startswith("_") or name not in self._data:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        del self._data[name]

    def has_key(self, key: str) -> bool:
        """Whether ``key`` is present."""
        return key in self._data

    def delete(self, key: str) -> Any:
        """Remove ``key`` and return its value (``None`` when it was missing)."""
        return self._data.pop(key, None)

    def merge(self, other: Mapping[str, Any]) -> StateProxy:
        """Write every pair of ``other`` (each may call ``on_change``); returns ``self``."""
        for key, value in other.items():
            self[key] = value
        return self

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the contents as a plain ``dict``."""
        return dict(self._data)

    def copy(self) -> StateProxy:
        """A deep copy with the same ``on_change``."""
        return StateProxy(_copy.deepcopy(self._data), on_change=self._on_change)

    def __copy__(self) -> StateProxy:
        return StateProxy(self._data, on_change=self._on_change)

    def __deepcopy__(self, memo: dict[int, Any]) -> StateProxy:
        return StateProxy(_copy.deepcopy(self._data, memo), on_change=self._on_change)

    @property
    def is_empty(self) -> bool:
        """Whether there are no keys."""
        return not self._data

    def __repr__(self) -> str:
        return f"StateProxy({self._data!r})"


# --------------------------------------------------------------------------------------------
# ResponseCache
# --------------------------------------------------------------------------------------------


class ResponseCache:
    """A small thread-safe LRU cache: what ``memory.cache`` returns when caching is enabled.

    RobotLab's ``memory.cache`` is RubyLLM's process-wide semantic cache. This port keeps the
    slot with an exact-match cache shared by every memory of the process (a semantic cache can
    be put behind the same methods). Keys are any hashable value, typically a prompt.

    Args:
        max_entries: the least recently used entry is dropped past this size.
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any, default: Any = None) -> Any:
        """The cached value for ``key``, else ``default``."""
        with self._lock:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            return self._entries[key]

    def set(self, key: Any, value: Any) -> Any:
        """Cache ``value`` under ``key`` and return it."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def fetch(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()`` stored and returned."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        return self.set(key, compute())

    def delete(self, key: Any) -> Any:
        """Drop ``key`` and return its value (``None`` when missing)."""
        with self._lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_shared_cache = ResponseCache()


# --------------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------------


class _Backend(Protocol):
    """What :class:`Memory` needs from a storage backend (custom keys only)."""

    def lookup(self, key: str) -> tuple[bool, Any]: ...
    def swap(self, key: str, value: Any) -> tuple[bool, Any]: ...
    def put(self, key: str, value: Any) -> None: ...
    def contains(self, key: str) -> bool: ...
    def delete(self, key: str) -> Any: ...
    def keys(self) -> list[str]: ...
    def clear(self) -> None: ...


class _HashBackend:
    """Custom keys in a ``dict`` (insertion order); values are stored as given, not copied."""

    def __init__(self) -> None:
        self._store: dict[str, Any] = {}

    def lookup(self, key: str) -> tuple[bool, Any]:
        if key in self._store:
            return True, self._store[key]
        return False, None

    def swap(self, key: str, value: Any) -> tuple[bool, Any]:
        found = key in self._store
        old = self._store.get(key)
        self._store[key] = value
        return found, old

    def put(self, key: str, value: Any) -> None:
        self._store[key] = value

    def contains(self, key: str) -> bool:
        return key in self._store

    def delete(self, key: str) -> Any:
        return self._store.pop(key, None)

    def keys(self) -> list[str]:
        return list(self._store)

    def clear(self) -> None:
        self._store.clear()


def _configured_redis_url() -> str | None:
    """``config.redis_url`` (``ROBOT_LAB_REDIS_URL``), else ``REDIS_URL``, else ``None``."""
    from .config import get_config

    return get_config().redis_url or os.environ.get("REDIS_URL") or None


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _create_backend(backend: str) -> _Backend:
    if backend == "hash":
        return _HashBackend()
    if backend not in ("auto", "redis"):
        raise ValueError(f"Unknown memory backend: {backend!r} (expected 'auto', 'hash' or 'redis')")
    from ._redis_backend import DEFAULT_REDIS_URL, RedisBackend

    url = _configured_redis_url()
    if backend == "auto":
        if url is None:
            return _HashBackend()
        try:
            return RedisBackend(url)
        except Exception as exc:
            logger.warning("Redis at %s is unavailable (%s); memory falls back to a local dict",
                           _redact(url), exc)
            return _HashBackend()
    url = url or DEFAULT_REDIS_URL
    try:
        return RedisBackend(url)
    except ConfigurationError:
        raise
    except Exception as exc:
        raise ConfigurationError(f"Cannot use Redis at {_redact(url)} for memory: {exc}") from exc


# --------------------------------------------------------------------------------------------
# Memory
# --------------------------------------------------------------------------------------------


def _as_list(values: Any, single: tuple[type, ...]) -> list[Any]:
    """Ruby's ``Array(x)``: ``None`` is empty, one item of the ``single`` types is wrapped."""
    if values is None:
        return []
    if isinstance(values, single):
        return [values]
    return list(values)


def _result(item: Any) -> Any:
    return RobotResult.from_dict(item) if isinstance(item, Mapping) else item


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    """``*`` is any run of characters, ``?`` one character; everything else is literal; anchored."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL)


@dataclass
class _Subscription:
    id: str
    callback: Callback
    pattern: re.Pattern[str] | None = None


class Memory:
    """Reactive key-value memory shared by robots and networks (Ruby ``RobotLab::Memory``).

    Keys are ``str`` only; any other key raises ``TypeError`` (Ruby's symbols become strings).

    Args:
        data: initial runtime data, read and written through :attr:`data` (a :class:`StateProxy`).
        results: robot results (:class:`~robotlab.result.RobotResult`, or their dicts).
        messages: conversation messages (:class:`~robotlab.messages.Message`, or their dicts).
        session_id: the conversation id used for history persistence.
        backend: where custom keys live. ``"hash"`` is a local ``dict``. ``"redis"`` is Redis at
            ``config.redis_url`` / ``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``), each value
            as JSON under ``robot_lab:memory:<uuid>:<key>``. ``"auto"`` (the default) uses Redis
            only when a URL is configured and the server answers, else the dict. Reserved keys,
            waiters and subscriptions always stay in this process, and Redis keys stay until
            :meth:`clear` or :meth:`reset` (nothing expires them).
        enable_cache: whether :attr:`cache` is the shared :class:`ResponseCache` (else ``None``).
        network_name: the network that owns this memory (read-only, recorded in changes).

    Raises:
        ValueError: an unknown ``backend``.
        ConfigurationError: ``backend="redis"`` and Redis cannot be used.

    **Reading.** ``get(key)`` returns the value or ``None``; ``get(a, b)`` returns ``{a: ..., b:
    ...}`` in the order asked (``None`` for a missing key). ``wait=True`` blocks until every key
    exists; ``wait=<seconds>`` waits that long *for each missing key* and then raises
    :class:`~robotlab.errors.AwaitTimeout`. A key that exists with the value ``None`` is returned
    at once. ``memory[key]`` is ``get(key)`` (``None`` when missing, as in Ruby).

    **Writing.** ``set(key, value)`` stores under a lock, wakes waiters, then calls subscribers.
    Callbacks run synchronously, in subscription order, on the writer's thread before ``set``
    returns, also inside a running event loop (keep them short there, since they run on the
    loop). A write made from inside a callback is notified after the current callbacks finish
    (writes are coalesced per thread, as RobotLab's single drainer does). A callback that raises
    is logged to the ``robotlab.memory`` logger and the others still run. A coroutine callback is
    started as a task on the running loop, or run to completion on the robotlab background loop
    when there is none.

    **current_writer** is the robot writing now (``Robot.run`` sets it and restores it). It is
    kept per ``contextvars`` context, so robots running concurrently as asyncio tasks (or in
    threads started with ``asyncio.to_thread``) each record their own name; a context that never
    set it sees the value set last anywhere.
    """

    def __init__(
        self,
        *,
        data: Mapping[str, Any] | None = None,
        results: Iterable[Any] | None = None,
        messages: Iterable[Message | Mapping[str, Any]] | None = None,
        session_id: str | None = None,
        backend: Backend = "auto",
        enable_cache: bool = True,
        network_name: str | None = None,
    ) -> None:
        self._backend: _Backend = _create_backend(backend)
        self._lock = threading.Lock()
        self._enable_cache = enable_cache
        self._network_name = network_name
        self._writer_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"robotlab_memory_writer_{id(self):x}"
        )
        self._writer_default: str | None = None

        self._data = self._new_data(data)
        self._results: list[Any] = [_result(r) for r in _as_list(results, (RobotResult, Mapping))]
        self._messages: list[Message] = [_message(m) for m in _as_list(messages, (Message, Mapping))]
        self._session_id = session_id
        self._cache: ResponseCache | None = _shared_cache if enable_cache else None

        self._subs_lock = threading.Lock()
        self._key_subs: dict[str, list[_Subscription]] = {}
        self._pattern_subs: list[_Subscription] = []
        self._waiters: dict[str, list[Waiter | _AsyncWaiter]] = {}
        self._dispatch = threading.local()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._document_store: DocumentStore | None = None

    @staticmethod
    def _new_data(data: Any) -> StateProxy:
        if data is None:
            return StateProxy()
        if not isinstance(data, Mapping):
            raise TypeError(f"data must be a mapping, got {type(data).__name__}")
        return StateProxy(data)

    # ---- attributes --------------------------------------------------------------------------

    @property
    def current_writer(self) -> str | None:
        """The name of the robot writing now (recorded as ``writer`` in each :class:`MemoryChange`)."""
        return self._writer_var.get(self._writer_default)

    @current_writer.setter
    def current_writer(self, name: str | None) -> None:
        self._writer_var.set(name)
        self._writer_default = name

    @property
    def network_name(self) -> str | None:
        """The network that owns this memory, if any."""
        return self._network_name

    @property
    def enable_cache(self) -> bool:
        """Whether :attr:`cache` is enabled."""
        return self._enable_cache

    @property
    def is_redis(self) -> bool:
        """Whether custom keys are stored in Redis."""
        return not isinstance(self._backend, _HashBackend)

    # ---- reserved keys -----------------------------------------------------------------------

    @property
    def data(self) -> StateProxy:
        """Runtime data. Writes through it are **not** reactive (no subscribers, no waiters)."""
        return self._data

    @data.setter
    def data(self, value: Mapping[str, Any] | None) -> None:
        self["data"] = value

    @property
    def results(self) -> list[Any]:
        """A copy of the robot results."""
        with self._lock:
            return list(self._results)

    @results.setter
    def results(self, value: Iterable[Any] | None) -> None:
        self["results"] = value

    @property
    def messages(self) -> list[Message]:
        """A copy of the conversation messages."""
        with self._lock:
            return list(self._messages)

    @messages.setter
    def messages(self, value: Iterable[Message | Mapping[str, Any]] | None) -> None:
        self["messages"] = value

    @property
    def session_id(self) -> str | None:
        """The conversation session id (``None`` when unset)."""
        return self._session_id

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        self._session_id = value

    @property
    def cache(self) -> ResponseCache | None:
        """The shared response cache, or ``None`` when ``enable_cache=False``."""
        return self._cache

    def _reserved(self, key: str) -> Any:
        return self._cache if key == "cache" else getattr(self, key)

    def _assign_reserved(self, key: str, value: Any) -> None:
        if key == "data":
            self._data = self._new_data(value)
        elif key == "results":
            items = [_result(r) for r in _as_list(value, (RobotResult, Mapping))]
            with self._lock:
                self._results = items
        elif key == "messages":
            messages = [_message(m) for m in _as_list(value, (Message, Mapping))]
            with self._lock:
                self._messages = messages
        elif key == "session_id":
            self._session_id = value
        else:
            raise ValueError("Cannot reassign cache - it is initialized automatically")

    # ---- item access -------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        """The value of ``key`` (a reserved key through its accessor; ``None`` when missing)."""
        if _check_key(key) in RESERVED_KEYS:
            return self._reserved(key)
        with self._lock:
            return self._backend.lookup(key)[1]

    def __setitem__(self, key: str, value: Any) -> None:
        """``set(key, value)`` for a custom key; a reserved key is assigned silently.

        ``data`` replaces the :class:`StateProxy`, ``results`` and ``messages`` become lists,
        ``session_id`` is stored as is.

        Raises:
            ValueError: ``key`` is ``"cache"`` (``"Cannot reassign cache - it is initialized
                automatically"``).
        """
        if _check_key(key) in RESERVED_KEYS:
            self._assign_reserved(key, value)
        else:
            self.set(key, value)

    def has_key(self, key: str) -> bool:
        """Whether ``key`` exists (always ``True`` for reserved keys)."""
        if _check_key(key) in RESERVED_KEYS:
            return True
        with self._lock:
            return self._backend.contains(key)

    def __contains__(self, key: object) -> bool:
        return self.has_key(key)  # type: ignore[arg-type]

    __iter__ = None  # not iterable: use keys()

    def delete(self, key: str) -> Any:
        """Remove a custom key and return its value (``None`` when missing); not reactive.

        Raises:
            ValueError: ``key`` is reserved (``"Cannot delete reserved key: <key>"``).
        """
        if _check_key(key) in RESERVED_KEYS:
            raise ValueError(f"Cannot delete reserved key: {key}")
        with self._lock:
            return self._backend.delete(key)

    def keys(self) -> list[str]:
        """The custom (non-reserved) keys; insertion order for the dict, sorted for Redis."""
        with self._lock:
            return list(self._backend.keys())

    def all_keys(self) -> list[str]:
        """:data:`RESERVED_KEYS` followed by :meth:`keys`."""
        return [*RESERVED_KEYS, *self.keys()]

    def clear(self) -> Memory:
        """Remove every custom key (reserved keys stay); not reactive. Returns ``self``."""
        with self._lock:
            self._backend.clear()
        return self

    def reset(self) -> Memory:
        """Back to empty: custom keys removed, ``data`` ``{}`` (a new proxy), ``results`` and
        ``messages`` ``[]``, ``session_id`` ``None``; the cache, subscriptions and waiters stay.
        """
        with self._lock:
            self._backend.clear()
            self._results = []
            self._messages = []
        self._data = StateProxy()
        self._session_id = None
        return self

    def merge(self, values: Mapping[str, Any]) -> Memory:
        """``self[key] = value`` for every pair (custom keys notify); returns ``self``."""
        for key, value in values.items():
            self[key] = value
        return self

    # ---- reactive API ------------------------------------------------------------------------

    def set(self, key: str, value: Any) -> Any:
        """Store ``value``, wake threads and tasks waiting for ``key``, notify subscribers.

        A reserved key follows the assignment rules of ``memory[key] = value`` (so ``"cache"``
        raises ``ValueError``) and still notifies. Returns ``value``.
        """
        if _check_key(key) in RESERVED_KEYS:
            previous = self._reserved(key)
            self._assign_reserved(key, value)
            waiters: list[Waiter | _AsyncWaiter] = []
        else:
            with self._lock:
                _, previous = self._backend.swap(key, value)
                waiters = self._waiters.pop(key, [])
        for waiter in waiters:
            waiter.signal(value)
        self._notify(key, value, previous)
        return value

    @overload
    def get(self, key: str, /, *, wait: bool | float | None = False) -> Any: ...
    @overload
    def get(self, key: str, key2: str, /, *keys: str,
            wait: bool | float | None = False) -> dict[str, Any]: ...

    def get(self, *keys: str, wait: bool | float | None = False) -> Any:
        """One key's value, or a ``{key: value}`` dict for several; see the class notes on ``wait``.

        Calling it with a wait from a thread that runs an event loop blocks that loop; use
        :meth:`aget` there (a ``RuntimeWarning`` says so).

        Raises:
            AwaitTimeout: a key did not appear in time (``"Timeout waiting for :<key> after <N>
                seconds"``).
            TypeError: no key, a key that is not ``str``, or an invalid ``wait``.
        """
        names = self._names(keys)
        should_wait, timeout = _wait_mode(wait)
        found: dict[str, tuple[bool, Any]] = {name: self._lookup(name) for name in dict.fromkeys(names)}
        if should_wait:
            for name, (present, _) in found.items():
                if not present:
                    found[name] = (True, self._wait_sync(name, timeout))
        if len(names) == 1:
            return found[names[0]][1]
        return {name: found[name][1] for name in names}

    async def aget(self, *keys: str, wait: bool | float | None = False) -> Any:
        """:meth:`get` for coroutines: waits without blocking the event loop.

        Raises:
            AwaitTimeout: as :meth:`get`.
        """
        names = self._names(keys)
        should_wait, timeout = _wait_mode(wait)
        found: dict[str, tuple[bool, Any]] = {name: self._lookup(name) for name in dict.fromkeys(names)}
        if should_wait:
            for name, (present, _) in found.items():
                if not present:
                    found[name] = (True, await self._wait_async(name, timeout))
        if len(names) == 1:
            return found[names[0]][1]
        return {name: found[name][1] for name in names}

    @staticmethod
    def _names(keys: tuple[str, ...]) -> list[str]:
        if not keys:
            raise TypeError("get() needs at least one key")
        return [_check_key(key) for key in keys]

    def _lookup(self, key: str) -> tuple[bool, Any]:
        if key in RESERVED_KEYS:
            return True, self._reserved(key)
        with self._lock:
            return self._backend.lookup(key)

    def _register(self, key: str, waiter: Waiter | _AsyncWaiter) -> tuple[bool, Any]:
        """Add ``waiter`` for ``key`` unless the key exists by now (then return its value)."""
        with self._lock:
            present, value = self._backend.lookup(key)
            if not present:
                self._waiters.setdefault(key, []).append(waiter)
            return present, value

    def _unregister(self, key: str, waiter: Waiter | _AsyncWaiter) -> tuple[bool, Any]:
        """Drop ``waiter`` and look the key up once more (a write may have raced the timeout)."""
        with self._lock:
            pending = self._waiters.get(key)
            if pending is not None and waiter in pending:
                pending.remove(waiter)
                if not pending:
                    del self._waiters[key]
            return self._backend.lookup(key)

    def _wait_sync(self, key: str, timeout: float | None) -> Any:
        waiter = Waiter()
        present, value = self._register(key, waiter)
        if present:
            return value
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            warnings.warn(f"memory.get({key!r}, wait=...) blocks the running event loop; "
                          "use 'await memory.aget(...)' in async code", RuntimeWarning, stacklevel=3)
        try:
            result = waiter.wait(timeout)
        finally:
            waiter.close()
        if waiter.is_signaled:
            return result
        present, value = self._unregister(key, waiter)
        if waiter.is_signaled:  # signaled between the timeout and the clean-up
            return waiter.wait(0)
        if present:
            return value
        raise _timeout_error(key, timeout)

    async def _wait_async(self, key: str, timeout: float | None) -> Any:
        waiter = _AsyncWaiter(asyncio.get_running_loop())
        present, value = self._register(key, waiter)
        if present:
            return value
        try:
            return await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            present, value = self._unregister(key, waiter)
            if present:
                return value
            raise _timeout_error(key, timeout) from None
        except BaseException:  # cancelled: stop waiting
            self._unregister(key, waiter)
            raise

    # ---- subscriptions -----------------------------------------------------------------------

    def subscribe(self, *keys: Any, callback: Any = _UNSET) -> Any:
        """Call ``callback(change)`` whenever :meth:`set` writes one of ``keys``; returns an id.

        The callback may also be the last positional argument (``subscribe("a", "b", fn)``), or
        be decorated: ``@memory.subscribe("a")`` subscribes the function, sets its
        ``subscription_id`` attribute when it can, and returns it unchanged.

        Raises:
            ValueError: ``callback`` is ``None`` or not callable (``"Block required for
                subscribe"``).
        """
        if callback is _UNSET and keys and callable(keys[-1]) and not isinstance(keys[-1], str):
            keys, callback = keys[:-1], keys[-1]
        names = [_check_key(key) for key in keys]
        if callback is _UNSET:
            return self._decorator(lambda fn: self._add_key_subscription(names, fn))
        return self._add_key_subscription(names, callback)

    def subscribe_pattern(self, pattern: str, callback: Any = _UNSET) -> Any:
        """Call ``callback(change)`` for every key matching the glob ``pattern``; returns an id.

        ``*`` matches any run of characters and ``?`` exactly one; the pattern must match the
        whole key (``"analysis:*"`` matches ``"analysis:tone"``, not ``"my_analysis:tone"``).
        Works as a decorator too, like :meth:`subscribe`.

        Raises:
            ValueError: ``callback`` is ``None`` or not callable (``"Block required for
                subscribe_pattern"``).
        """
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be str, got {type(pattern).__name__}")
        regex = _glob_to_regex(pattern)
        if callback is _UNSET:
            return self._decorator(lambda fn: self._add_pattern_subscription(regex, fn))
        return self._add_pattern_subscription(regex, callback)

    @staticmethod
    def _decorator(add: Callable[[Any], str]) -> Callable[[F], F]:
        def decorate(fn: F) -> F:
            subscription_id = add(fn)
            try:
                fn.subscription_id = subscription_id  # type: ignore[attr-defined]
            except (AttributeError, TypeError):
                pass
            return fn

        return decorate

    @staticmethod
    def _check_callback(callback: Any, method: str) -> Callback:
        if callback is None or callback is _UNSET or not callable(callback):
            raise ValueError(f"Block required for {method}")
        return callback

    def _add_key_subscription(self, names: list[str], callback: Any) -> str:
        callback = self._check_callback(callback, "subscribe")
        subscription = _Subscription(id=str(uuid.uuid4()), callback=callback)
        with self._subs_lock:
            for name in names:
                self._key_subs.setdefault(name, []).append(subscription)
        return subscription.id

    def _add_pattern_subscription(self, regex: re.Pattern[str], callback: Any) -> str:
        callback = self._check_callback(callback, "subscribe_pattern")
        subscription = _Subscription(id=str(uuid.uuid4()), callback=callback, pattern=regex)
        with self._subs_lock:
            self._pattern_subs.append(subscription)
        return subscription.id

    def unsubscribe(self, subscription_id: str) -> bool:
        """Remove a subscription (key or pattern); whether it was found."""
        removed = False
        with self._subs_lock:
            for name in list(self._key_subs):
                kept = [s for s in self._key_subs[name] if s.id != subscription_id]
                if len(kept) != len(self._key_subs[name]):
                    removed = True
                    if kept:
                        self._key_subs[name] = kept
                    else:
                        del self._key_subs[name]
            kept = [s for s in self._pattern_subs if s.id != subscription_id]
            if len(kept) != len(self._pattern_subs):
                removed = True
                self._pattern_subs = kept
        return removed

    def unsubscribe_keys(self, *keys: str) -> Memory:
        """Remove every key subscription on ``keys`` (pattern subscriptions stay); returns ``self``."""
        names = [_check_key(key) for key in keys]
        with self._subs_lock:
            for name in names:
                self._key_subs.pop(name, None)
        return self

    def is_subscribed(self, key: str) -> bool:
        """Whether a key subscription or a matching pattern subscription exists for ``key``."""
        _check_key(key)
        with self._subs_lock:
            if self._key_subs.get(key):
                return True
            return any(s.pattern is not None and s.pattern.fullmatch(key) for s in self._pattern_subs)

    def _notify(self, key: str, value: Any, previous: Any) -> None:
        with self._subs_lock:
            callbacks = [s.callback for s in self._key_subs.get(key, ())]
            callbacks += [s.callback for s in self._pattern_subs if s.pattern and s.pattern.fullmatch(key)]
        if not callbacks:
            return
        change = MemoryChange(key=key, value=value, previous=previous, writer=self.current_writer,
                              network_name=self._network_name)
        state = self._dispatch
        queue: deque[tuple[MemoryChange, list[Callback]]] | None = getattr(state, "queue", None)
        if queue is None:
            queue = state.queue = deque()
        queue.append((change, callbacks))
        if getattr(state, "draining", False):
            return  # a callback of this thread wrote; the running drain delivers it next
        state.draining = True
        try:
            while queue:
                item, pending = queue.popleft()
                for callback in pending:
                    self._deliver(callback, item)
        except BaseException:
            queue.clear()
            raise
        finally:
            state.draining = False

    def _deliver(self, callback: Callback, change: MemoryChange) -> None:
        try:
            outcome = callback(change)
            if inspect.isawaitable(outcome):
                self._run_awaitable(outcome, change)
        except Exception:
            logger.exception("Memory subscriber %r failed on key %r", callback, change.key)

    def _run_awaitable(self, awaitable: Awaitable[Any], change: MemoryChange) -> None:
        async def run() -> Any:
            return await awaitable

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            from ._runtime import run_sync

            run_sync(run())
            return
        task = loop.create_task(run())
        self._tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                logger.error("Memory subscriber failed on key %r", change.key, exc_info=finished.exception())

        task.add_done_callback(done)

    # ---- documents ---------------------------------------------------------------------------

    @property
    def document_store(self) -> DocumentStore:
        """The :class:`~robotlab.document_store.DocumentStore` behind the ``*_document`` methods.

        Created on first use with the default (lexical) embedder; assign a store to use another
        embedder. Documents are not memory keys: :meth:`keys`, :meth:`to_dict` and copies leave them out.
        """
        with self._lock:
            if self._document_store is None:
                self._document_store = DocumentStore()
            return self._document_store

    @document_store.setter
    def document_store(self, store: DocumentStore) -> None:
        self._document_store = store

    def store_document(self, key: str, text: str) -> Memory:
        """Embed ``text`` and keep it under ``key`` for :meth:`search_documents`; returns ``self``."""
        self.document_store.store(key, text)
        return self

    def search_documents(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """The stored documents most similar to ``query``: ``[{"key", "text", "score"}]``, best first."""
        return self.document_store.search(query, limit)

    def document_keys(self) -> list[str]:
        """The keys of the stored documents."""
        return self.document_store.keys()

    def delete_document(self, key: str) -> Memory:
        """Remove the document under ``key``; returns ``self``."""
        self.document_store.delete(key)
        return self

    # ---- history -----------------------------------------------------------------------------

    def append_result(self, result: Any) -> Memory:
        """Add a robot result to :attr:`results` (not reactive); returns ``self``."""
        result = _result(result)
        with self._lock:
            self._results.append(result)
        return self

    def set_results(self, results: Iterable[Any] | None) -> Memory:
        """Replace :attr:`results` (when loading from persistence); returns ``self``."""
        self._assign_reserved("results", results)
        return self

    def results_from(self, start_index: int) -> list[Any]:
        """The results from ``start_index`` on (``[]`` past the end), for incremental saves."""
        with self._lock:
            return self._results[start_index:]

    def format_history(self, formatter: Callable[[Any], Iterable[Any]] | None = None) -> list[Any]:
        """The messages followed by each result's ``formatter(result)`` items.

        The default formatter gives ``result.output + result.tool_calls``.
        """
        def default(result: Any) -> Iterable[Any]:
            return [*result.output, *result.tool_calls]

        format_result = formatter or default
        history: list[Any] = self.messages
        for result in self.results:
            history.extend(format_result(result))
        return history

    # ---- serialization and copies ------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """``{"data", "results", "messages", "session_id", "custom"}``; ``session_id`` is left out
        when ``None``; ``custom`` (the non-reserved keys) is always there. The cache is not saved.
        """
        return _compact(
            {
                "data": self._data.to_dict(),
                "results": [r.export() if hasattr(r, "export") else r for r in self.results],
                "messages": [m.to_dict() for m in self.messages],
                "session_id": self._session_id,
                "custom": {key: self[key] for key in self.keys()},
            }
        )

    def to_json(self) -> str:
        """:meth:`to_dict` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **options: Any) -> Memory:
        """Rebuild a memory from :meth:`to_dict` output.

        ``options`` go to the constructor (``backend``, ``enable_cache``, ``network_name``); no
        subscriptions are restored.
        """
        memory = cls(
            data=data.get("data") or {},
            results=[RobotResult.from_dict(r) for r in data.get("results") or []],
            messages=[Message.from_dict(m) for m in data.get("messages") or []],
            session_id=data.get("session_id"),
            **options,
        )
        for key, value in (data.get("custom") or {}).items():
            memory[key] = value
        return memory

    @classmethod
    def from_json(cls, text: str, **options: Any) -> Memory:
        """:meth:`from_dict` of parsed JSON."""
        return cls.from_dict(json.loads(text), **options)

    def copy(self) -> Memory:
        """An independent copy for isolated execution.

        ``data`` and custom keys are deep-copied without notifications; ``results`` and
        ``messages`` are new lists of the same objects; ``enable_cache``, ``network_name`` and
        the backend kind are kept; subscriptions, waiters and ``current_writer`` are not.
        """
        clone = Memory(
            data=_copy.deepcopy(self._data.to_dict()),
            results=self.results,
            messages=self.messages,
            session_id=self._session_id,
            backend="redis" if self.is_redis else "hash",
            enable_cache=self._enable_cache,
            network_name=self._network_name,
        )
        for key in self.keys():
            clone._backend.put(key, _copy.deepcopy(self[key]))
        return clone

    def __copy__(self) -> Memory:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Memory:
        return self.copy()

    def __repr__(self) -> str:
        kind = "redis" if self.is_redis else "hash"
        return f"<Memory backend={kind} keys={self.keys()!r} network_name={self._network_name!r}>"


def create_memory(*, data: Mapping[str, Any] | None = None, enable_cache: bool = True,
                  **options: Any) -> Memory:
    """A new :class:`Memory` (Ruby ``RobotLab.create_memory``); ``options`` go to the constructor."""
    return Memory(data=data, enable_cache=enable_cache, **options)
