"""The memory itself: :class:`Memory` and :func:`create_memory`.

A :class:`Memory` composes the parts of this package: its storage (a backend), its reserved
keys, the waiters for missing keys and the subscriptions. It decides the order of a write
(store, wake waiters, notify) and keeps the public API; each part does its own work. Its
subscription, document and reserved-key members come from its bases :class:`~robotlab.memory.subscriptions.Subscribing`,
:class:`~robotlab.memory.documents.Documents` and :class:`~robotlab.memory.reserved.ReservedAccess`
(the reserved keys as attributes, and the history).
"""

from __future__ import annotations

import contextvars
import copy as _copy
import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any, overload

from .._record import dumps as _dumps
from ..llm.cache import shared_cache
from ..messages import Message
from .backends import BackendKind, HashBackend, create_backend
from .changes import MemoryChange
from .documents import Documents
from .reserved import RESERVED_KEYS, ReservedAccess, ReservedKeys
from .serialization import constructor_arguments, copy_arguments, to_dict
from .state import check_key
from .subscriptions import Subscribing, SubscriptionRegistry
from .waiting import WaiterSet, wait_mode

__all__ = ["Memory", "create_memory"]


class Memory(Subscribing, Documents, ReservedAccess):
    """Reactive key-value memory shared by robots and networks (Ruby ``RobotLab::Memory``).

    Keys are ``str`` only; any other key raises ``TypeError`` (Ruby's symbols become strings).

    Args:
        data: initial runtime data, read and written through :attr:`data` (a :class:`StateProxy`).
        results: robot results (:class:`~robotlab.result.RobotResult`, or their dicts).
        messages: conversation messages (:class:`~robotlab.messages.Message`, or their dicts).
        session_id: the conversation id used for history persistence.
        backend: where custom keys live. ``"hash"`` is a local ``dict``. ``"redis"`` is Redis at
            ``redis_url``, else ``config.redis_url`` / ``REDIS_URL`` (default
            ``redis://127.0.0.1:6379/0``), each value as JSON under ``robot_lab:memory:<namespace>:<key>``.
            ``"auto"`` (the default) uses Redis only when a URL is configured and the server
            answers (or when ``redis_url``, ``namespace`` or ``ttl`` is given), else the dict.
            Reserved keys stay in this process.
        enable_cache: whether :attr:`cache` is the shared :class:`ResponseCache` (else ``None``).
        network_name: the network that owns this memory (read-only, recorded in changes).
        redis_url: the Redis server of a Redis memory.
        namespace: the name under which processes share a Redis memory (a turn id, say; letters,
            digits, ``_``, ``.``, ``-``): every memory created with the same URL and namespace
            sees the same keys, and its waiters and subscribers hear the others' writes. A new
            uuid when ``None`` (private: it neither publishes nor listens). Keys stay until :meth:`clear` or
            :meth:`reset`, or ``ttl``.
        ttl: seconds each Redis key lives after its last write (``None``: no expiry).

    Raises:
        ValueError: an unknown ``backend``, Redis options with ``backend="hash"``, or an invalid
            ``namespace`` or ``ttl``.
        ConfigurationError: Redis is required (``backend="redis"``, or a Redis option) and cannot be used.

    Reading, writing, the delivery of changes and ``current_writer`` follow the rules in
    :mod:`robotlab.memory`.
    """

    def __init__(
        self,
        *,
        data: Mapping[str, Any] | None = None,
        results: Iterable[Any] | None = None,
        messages: Iterable[Message | Mapping[str, Any]] | None = None,
        session_id: str | None = None,
        backend: BackendKind = "auto",
        enable_cache: bool = True,
        network_name: str | None = None,
        redis_url: str | None = None,
        namespace: str | None = None,
        ttl: float | None = None,
    ) -> None:
        self._backend = create_backend(backend, redis_url=redis_url, namespace=namespace,
                                       network_name=network_name, ttl=ttl)
        self._lock = threading.Lock()
        self._enable_cache = enable_cache
        self._network_name = network_name
        self._writer_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"robotlab_memory_writer_{id(self):x}"
        )
        self._writer_default: str | None = None
        self._reserved = ReservedKeys(self._lock, data=data, results=results, messages=messages,
                                      session_id=session_id, cache=shared_cache if enable_cache else None)
        self._waiters = WaiterSet(self._lock, self._backend.lookup)
        self._subscriptions = SubscriptionRegistry(on_add=self._hear_other_processes)
        self._document_store = None

    # ---- attributes
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
        return not isinstance(self._backend, HashBackend)

    # ---- item access
    def __getitem__(self, key: str) -> Any:
        """The value of ``key`` (a reserved key through its accessor; ``None`` when missing)."""
        return self._lookup(check_key(key))[1]

    def __setitem__(self, key: str, value: object) -> None:
        """``set(key, value)`` for a custom key; a reserved key is assigned silently.

        ``data`` replaces the :class:`StateProxy`, ``results`` and ``messages`` become lists.

        Raises:
            ValueError: ``key`` is ``"cache"`` (``"Cannot reassign cache - it is initialized automatically"``).
        """
        if check_key(key) in RESERVED_KEYS:
            self._reserved.assign(key, value)
        else:
            self.set(key, value)

    def has_key(self, key: str) -> bool:
        """Whether ``key`` exists (always ``True`` for reserved keys)."""
        if check_key(key) in RESERVED_KEYS:
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
        if check_key(key) in RESERVED_KEYS:
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
        """Remove every custom key (reserved keys stay); not reactive. Returns ``self``.

        For a shared Redis memory this removes the namespace's keys for every process.
        """
        with self._lock:
            self._backend.clear()
        return self

    def reset(self) -> Memory:
        """Back to empty (no custom keys, new ``data``, no results or messages); cache and subscriptions stay."""
        self.clear()
        self._reserved.reset()
        return self

    def merge(self, values: Mapping[str, Any]) -> Memory:
        """``self[key] = value`` for every pair (custom keys notify); returns ``self``."""
        for key, value in values.items():
            self[key] = value
        return self

    def close(self) -> None:
        """Stop hearing other processes' writes (a Redis memory); the data stays. Nothing for a dict."""
        self._backend.close()

    # ---- reactive API
    def set(self, key: str, value: object) -> Any:
        """Store ``value``, wake threads and tasks waiting for ``key``, notify subscribers.

        A reserved key follows the assignment rules of ``memory[key] = value`` (so ``"cache"``
        raises ``ValueError``) and still notifies (this process only). Returns ``value``.
        """
        writer = self._writer_var.get(self._writer_default)
        if check_key(key) in RESERVED_KEYS:
            previous = self._reserved.get(key)
            self._reserved.assign(key, value)
            waiters: list[Any] = []
        else:
            with self._lock:
                _, previous = self._backend.swap(key, value, writer=writer)
                waiters = self._waiters.take(key)
        for waiter in waiters:
            waiter.signal(value)
        self._subscriptions.notify(key, value, previous, writer, self._network_name)
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
            AwaitTimeout: a key did not appear in time (``"Timeout waiting for :<key> after <N> seconds"``).
            TypeError: no key, a key that is not ``str``, or an invalid ``wait``.
        """
        if len(keys) == 1 and (wait is False or wait is None):
            return self._lookup(check_key(keys[0]))[1]
        names = self._names(keys)
        should_wait, timeout = wait_mode(wait)
        found = {name: self._lookup(name) for name in dict.fromkeys(names)}
        if should_wait:
            for name, (present, _) in found.items():
                if not present:
                    self._hear_other_processes()
                    found[name] = (True, self._waiters.wait(name, timeout))
        return self._result(names, found)

    async def aget(self, *keys: str, wait: bool | float | None = False) -> Any:
        """:meth:`get` for coroutines: waits without blocking the event loop.

        Raises:
            AwaitTimeout: as :meth:`get`.
        """
        names = self._names(keys)
        should_wait, timeout = wait_mode(wait)
        found = {name: self._lookup(name) for name in dict.fromkeys(names)}
        if should_wait:
            for name, (present, _) in found.items():
                if not present:
                    self._hear_other_processes()
                    found[name] = (True, await self._waiters.wait_async(name, timeout))
        return self._result(names, found)

    @staticmethod
    def _result(names: list[str], found: dict[str, tuple[bool, Any]]) -> Any:
        """One key's value, or a dict of the keys present (missing keys are left out, as in RobotLab)."""
        if len(names) == 1:
            return found[names[0]][1]
        return {name: found[name][1] for name in names if found[name][0]}

    @staticmethod
    def _names(keys: tuple[str, ...]) -> list[str]:
        if not keys:
            raise TypeError("get() needs at least one key")
        return [check_key(key) for key in keys]

    def _lookup(self, key: str) -> tuple[bool, Any]:
        if key in RESERVED_KEYS:
            return True, self._reserved.get(key)
        with self._lock:
            return self._backend.lookup(key)

    # ---- other processes
    def _hear_other_processes(self) -> None:
        """Have the backend pass other processes' writes to :meth:`_receive` (nothing for a dict)."""
        self._backend.listen(self._receive)

    def _receive(self, change: MemoryChange | None) -> None:
        """Another process wrote ``change``: wake its waiters, notify subscribers on the delivery thread.

        ``None`` means changes may have been missed (a reconnect): the waited keys are looked up again.
        """
        if change is None:
            self._waiters.recheck()
        else:
            self._waiters.wake(change.key, change.value)
            self._subscriptions.notify_soon(change)

    # ---- serialization and copies
    def to_dict(self) -> dict[str, Any]:
        """``{"data", "results", "messages", "session_id" (when set), "custom"}``; the cache is not saved."""
        return to_dict(self)

    def to_json(self) -> str:
        """:meth:`to_dict` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], **options: Any) -> Memory:
        """Rebuild a memory from :meth:`to_dict` output.

        ``options`` go to the constructor (``backend``, ``enable_cache``, ``network_name``, ...);
        no subscriptions are restored.
        """
        memory = cls(**constructor_arguments(data), **options)
        memory.merge(data.get("custom") or {})
        return memory

    @classmethod
    def from_json(cls, text: str, **options: Any) -> Memory:
        """:meth:`from_dict` of parsed JSON."""
        return cls.from_dict(json.loads(text), **options)

    def copy(self) -> Memory:
        """An independent copy for isolated execution.

        ``data`` and custom keys are deep-copied without notifications; ``results`` and
        ``messages`` are new lists of the same objects; ``enable_cache``, ``network_name`` and
        the backend kind (and Redis server) are kept, in a new private namespace; subscriptions,
        waiters and ``current_writer`` are not.
        """
        clone = Memory(**copy_arguments(self), backend="redis" if self.is_redis else "hash",
                       redis_url=getattr(self._backend, "url", None))
        for key in self.keys():
            clone._backend.put(key, _copy.deepcopy(self[key]))
        return clone

    clone = copy  # RobotLab's name

    def __copy__(self) -> Memory:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Memory:
        return self.copy()

    def __repr__(self) -> str:
        kind = "redis" if self.is_redis else "hash"
        return f"<Memory backend={kind} keys={self.keys()!r} network_name={self._network_name!r}>"


def create_memory(*, data: Mapping[str, Any] | None = None, enable_cache: bool = True,
                  **options: Any) -> Memory:
    """A new :class:`Memory` (Ruby ``RobotLab.create_memory``); ``options`` go to the constructor.

    A memory several processes share (the tasks of one network turn on different workers, say)
    is ``create_memory(redis_url=url, namespace=turn_id)`` in each of them.
    """
    return Memory(data=data, enable_cache=enable_cache, **options)
