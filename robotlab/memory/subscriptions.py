"""Who hears of a memory's changes: key and glob-pattern subscriptions, and their delivery.

A :class:`SubscriptionRegistry` belongs to one memory. It keeps the subscriptions
(``subscribe("a", "b", callback=...)``, ``subscribe_pattern("analysis:*", ...)``), finds the
callbacks of a key (:meth:`SubscriptionRegistry.matching`) and calls them with a
:class:`~robotlab.memory.changes.MemoryChange` (:meth:`SubscriptionRegistry.dispatch`).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import threading
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from .changes import MemoryChange
from .state import check_key

__all__ = ["UNSET", "Callback", "F", "SubscriptionRegistry", "Subscribing", "glob_to_regex"]

logger = logging.getLogger("robotlab.memory")

Callback = Callable[[MemoryChange], Any]
F = TypeVar("F", bound=Callable[..., Any])

#: "No callback given": the subscribe methods then return a decorator.
UNSET: Any = object()


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """``*`` is any run of characters, ``?`` one character; everything else is literal; anchored."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL)


@dataclass
class _Subscription:
    id: str
    callback: Callback
    pattern: re.Pattern[str] | None = None


def _check_callback(callback: object, method: str) -> Callback:
    if callback is None or callback is UNSET or not callable(callback):
        raise ValueError(f"Block required for {method}")
    checked: Callback = callback
    return checked


def _decorator(add: Callable[[Any], str]) -> Callable[[F], F]:
    def decorate(fn: F) -> F:
        subscription_id = add(fn)
        try:
            fn.subscription_id = subscription_id  # type: ignore[attr-defined]
        except (AttributeError, TypeError):
            pass
        return fn

    return decorate


class SubscriptionRegistry:
    """The subscriptions of one memory, and the delivery of changes to them.

    Delivery rules: callbacks run synchronously, in subscription order, on the dispatching
    thread; a change dispatched from inside a callback is delivered after the current callbacks
    finish (per thread); a callback that raises is logged to ``robotlab.memory`` and the others
    still run; a coroutine callback becomes a task on the running loop, or runs to its end on
    the robotlab background loop when there is none.

    Args:
        on_add: called (with no argument) before each subscription is added; a shared memory
            uses it to start hearing other processes' writes.
    """

    def __init__(self, on_add: Callable[[], None] | None = None) -> None:
        self._on_add = on_add
        self._lock = threading.Lock()
        self._key_subs: dict[str, list[_Subscription]] = {}
        self._pattern_subs: list[_Subscription] = []
        self._dispatch = threading.local()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._delivery: tuple[int, ThreadPoolExecutor] | None = None

    # ---- registering -------------------------------------------------------------------------

    def subscribe(self, keys: tuple[Any, ...], callback: object = UNSET) -> str:
        """Subscribe ``callback`` to ``keys``; see :meth:`Memory.subscribe` for the accepted forms."""
        if callback is UNSET and keys and callable(keys[-1]) and not isinstance(keys[-1], str):
            keys, callback = keys[:-1], keys[-1]
        names = [check_key(key) for key in keys]
        return self._add_keys(names, callback)

    def subscribe_pattern(self, pattern: str, callback: object = UNSET) -> str:
        """Subscribe ``callback`` to the keys matching the glob ``pattern``; see :meth:`Memory.subscribe_pattern`."""
        return self._add_pattern(self._regex(pattern), callback)

    def subscriber(self, keys: tuple[Any, ...]) -> Callable[[F], F]:
        """A decorator that subscribes the function it decorates to ``keys``."""
        names = [check_key(key) for key in keys]
        return _decorator(lambda fn: self._add_keys(names, fn))

    def pattern_subscriber(self, pattern: str) -> Callable[[F], F]:
        """A decorator that subscribes the function it decorates to the glob ``pattern``."""
        regex = self._regex(pattern)
        return _decorator(lambda fn: self._add_pattern(regex, fn))

    @staticmethod
    def _regex(pattern: str) -> re.Pattern[str]:
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be str, got {type(pattern).__name__}")
        return glob_to_regex(pattern)

    def _add_keys(self, names: list[str], callback: Any) -> str:
        subscription = _Subscription(id=str(uuid.uuid4()), callback=_check_callback(callback, "subscribe"))
        if self._on_add is not None and names:
            self._on_add()
        with self._lock:
            for name in names:
                self._key_subs.setdefault(name, []).append(subscription)
        return subscription.id

    def _add_pattern(self, regex: re.Pattern[str], callback: Any) -> str:
        subscription = _Subscription(id=str(uuid.uuid4()), callback=_check_callback(callback, "subscribe_pattern"),
                                     pattern=regex)
        if self._on_add is not None:
            self._on_add()
        with self._lock:
            self._pattern_subs.append(subscription)
        return subscription.id

    def unsubscribe(self, subscription_id: str) -> bool:
        """Remove a subscription (key or pattern); whether it was found."""
        removed = False
        with self._lock:
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

    def unsubscribe_keys(self, keys: Iterable[str]) -> None:
        """Remove every key subscription on ``keys`` (pattern subscriptions stay)."""
        names = [check_key(key) for key in keys]
        with self._lock:
            for name in names:
                self._key_subs.pop(name, None)

    def is_subscribed(self, key: str) -> bool:
        """Whether a key subscription or a matching pattern subscription exists for ``key``."""
        check_key(key)
        with self._lock:
            if self._key_subs.get(key):
                return True
            return any(s.pattern is not None and s.pattern.fullmatch(key) for s in self._pattern_subs)

    # ---- delivering --------------------------------------------------------------------------

    def matching(self, key: str) -> list[Callback]:
        """The callbacks for a change of ``key``: key subscriptions first, then patterns, each in order."""
        if not (self._key_subs or self._pattern_subs):
            return []  # nobody subscribed (the common case): no lock needed to see that
        with self._lock:
            callbacks = [s.callback for s in self._key_subs.get(key, ())]
            callbacks += [s.callback for s in self._pattern_subs if s.pattern and s.pattern.fullmatch(key)]
        return callbacks

    def notify(self, key: str, value: object, previous: object, writer: str | None, network_name: str | None) -> None:
        """Tell the subscribers of ``key`` of a write made in this process (nothing when there are none)."""
        if not (self._key_subs or self._pattern_subs):
            return
        callbacks = self.matching(key)
        if callbacks:
            self.dispatch(MemoryChange(key=key, value=value, previous=previous, writer=writer,
                                       network_name=network_name), callbacks)

    def dispatch(self, change: MemoryChange, callbacks: list[Callback]) -> None:
        """Call ``callbacks`` with ``change`` (after the current ones when called from a callback)."""
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

    def notify_soon(self, change: MemoryChange) -> None:
        """Tell the subscribers of ``change.key`` on this registry's delivery thread, in order.

        For another process's write: the thread that hears those hands them over here, so a slow
        or waiting callback never delays the waking of waiters.
        """
        callbacks = self.matching(change.key)
        if not callbacks:
            return
        with self._lock:
            if self._delivery is None or self._delivery[0] != os.getpid():  # none yet, or forked
                executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="robotlab-memory-subscribers")
                self._delivery = (os.getpid(), executor)
            executor = self._delivery[1]
        executor.submit(self.dispatch, change, callbacks)

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
            from ..runtime import run_sync

            run_sync(run())
            return
        task = loop.create_task(run())
        self._tasks.add(task)

        def done(finished: asyncio.Task[Any]) -> None:
            self._tasks.discard(finished)
            if not finished.cancelled() and finished.exception() is not None:
                logger.error("Memory subscriber failed on key %r", change.key, exc_info=finished.exception())

        task.add_done_callback(done)


class Subscribing:
    """The subscription methods of a :class:`~robotlab.memory.Memory`, handed to its :class:`SubscriptionRegistry`."""

    _subscriptions: SubscriptionRegistry

    def subscribe(self, *keys: object, callback: object = UNSET) -> str:
        """Call ``callback(change)`` whenever :meth:`set` writes one of ``keys``; returns an id.

        The callback may also be the last positional argument (``subscribe("a", "b", fn)``); the
        decorator form is :meth:`subscriber`.

        Raises:
            ValueError: no callable callback (``"Block required for subscribe"``).
        """
        return self._subscriptions.subscribe(keys, callback)

    def subscribe_pattern(self, pattern: str, callback: object = UNSET) -> str:
        """Call ``callback(change)`` for every key matching the glob ``pattern``; returns an id.

        ``*`` matches any run of characters and ``?`` exactly one; the pattern must match the
        whole key (``"analysis:*"`` matches ``"analysis:tone"``, not ``"my_analysis:tone"``).
        The decorator form is :meth:`pattern_subscriber`.

        Raises:
            ValueError: no callable callback (``"Block required for subscribe_pattern"``).
        """
        return self._subscriptions.subscribe_pattern(pattern, callback)

    def subscriber(self, *keys: object) -> Callable[[F], F]:
        """``@memory.subscriber("a", "b")``: subscribes the function, sets its ``subscription_id``."""
        return self._subscriptions.subscriber(keys)

    def pattern_subscriber(self, pattern: str) -> Callable[[F], F]:
        """A decorator form of :meth:`subscribe_pattern`: ``@memory.pattern_subscriber("score:*")``."""
        return self._subscriptions.pattern_subscriber(pattern)

    def unsubscribe(self, subscription_id: str) -> bool:
        """Remove a subscription (key or pattern); whether it was found."""
        return self._subscriptions.unsubscribe(subscription_id)

    def unsubscribe_keys(self, *keys: str) -> Self:
        """Remove every key subscription on ``keys`` (pattern subscriptions stay); returns ``self``."""
        self._subscriptions.unsubscribe_keys(keys)
        return self

    def is_subscribed(self, key: str) -> bool:
        """Whether a key subscription or a matching pattern subscription exists for ``key``."""
        return self._subscriptions.is_subscribed(key)
