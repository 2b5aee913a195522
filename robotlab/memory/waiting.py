"""Waiting for a memory key: :class:`Waiter`, the async waiter, and :class:`WaiterSet`.

``memory.get(key, wait=...)`` blocks a thread on a :class:`Waiter`; ``await memory.aget(key,
wait=...)`` awaits an :class:`AsyncWaiter`'s future. A memory keeps the pending ones in a
:class:`WaiterSet`, and its writes wake them (:meth:`WaiterSet.take`, :meth:`WaiterSet.wake`).
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable
from typing import Any, Literal

from ..errors import AwaitTimeout

__all__ = ["TIMEOUT", "AsyncWaiter", "Waiter", "WaiterSet", "wait_mode"]

#: What :meth:`Waiter.wait` returns when it gives up (Ruby's ``:timeout``).
TIMEOUT: Literal["timeout"] = "timeout"


def wait_mode(wait: object) -> tuple[bool, float | None]:
    """``(should_wait, timeout)``: ``False``/``None`` never wait, ``True`` waits forever, a number waits.

    Raises:
        TypeError: ``wait`` is none of these.
    """
    if wait is None or wait is False:
        return False, None
    if wait is True:
        return True, None
    if isinstance(wait, int | float):
        return True, wait
    raise TypeError(f"wait must be True, False, None or a number of seconds, got {wait!r}")


def _timeout_error(key: str, timeout: float | None) -> AwaitTimeout:
    return AwaitTimeout(f"Timeout waiting for :{key} after {timeout} seconds")


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

    def signal(self, value: object) -> None:
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


class AsyncWaiter:
    """A waiter for :meth:`Memory.aget`: resolves a future on its own loop from any thread.

    Args:
        loop: the loop whose coroutine awaits :attr:`future`.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()

    def _resolve(self, value: object) -> None:
        if not self.future.done():
            self.future.set_result(value)

    def signal(self, value: object) -> None:
        """Resolve the future with ``value`` (on its loop; nothing when the loop has closed)."""
        try:
            self._loop.call_soon_threadsafe(self._resolve, value)
        except RuntimeError:  # the loop is closed; nobody is waiting any more
            pass


class WaiterSet:
    """The threads and tasks of one memory waiting for keys that do not exist yet.

    Args:
        lock: the memory's lock; it guards the storage and this set together, so a write and a
            registration never miss each other.
        lookup: ``lookup(key) -> (present, value)`` in the memory's storage, called with ``lock`` held.
    """

    def __init__(self, lock: threading.Lock, lookup: Callable[[str], tuple[bool, Any]]) -> None:
        self._lock = lock
        self._lookup = lookup
        #: The pending waiters by key (empty when nobody waits).
        self.pending: dict[str, list[Waiter | AsyncWaiter]] = {}

    def take(self, key: str) -> list[Waiter | AsyncWaiter]:
        """Remove and return the waiters of ``key``; the caller holds the lock and signals them."""
        return self.pending.pop(key, [])

    def wake(self, key: str, value: object) -> None:
        """Wake every waiter of ``key`` with ``value`` (a write this set did not see, e.g. another process's)."""
        with self._lock:
            waiters = self.take(key)
        for waiter in waiters:
            waiter.signal(value)

    def recheck(self) -> None:
        """Look every waited key up again and wake the waiters of those that exist (after missed writes)."""
        with self._lock:
            found = {key: self._lookup(key) for key in self.pending}
        for key, (present, value) in found.items():
            if present:
                self.wake(key, value)

    def _register(self, key: str, waiter: Waiter | AsyncWaiter) -> tuple[bool, Any]:
        """Add ``waiter`` for ``key`` unless the key exists by now (then return its value)."""
        with self._lock:
            present, value = self._lookup(key)
            if not present:
                self.pending.setdefault(key, []).append(waiter)
            return present, value

    def _unregister(self, key: str, waiter: Waiter | AsyncWaiter) -> tuple[bool, Any]:
        """Drop ``waiter`` and look the key up once more (a write may have raced the timeout)."""
        with self._lock:
            pending = self.pending.get(key)
            if pending is not None and waiter in pending:
                pending.remove(waiter)
                if not pending:
                    del self.pending[key]
            return self._lookup(key)

    def wait(self, key: str, timeout: float | None) -> Any:
        """Block this thread until ``key`` is written and return the value.

        Warns (``RuntimeWarning``) when the thread runs an event loop, which the wait blocks.

        Raises:
            AwaitTimeout: ``timeout`` seconds passed first.
        """
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

    async def wait_async(self, key: str, timeout: float | None) -> Any:
        """Await until ``key`` is written and return the value, without blocking the loop.

        Raises:
            AwaitTimeout: ``timeout`` seconds passed first.
        """
        waiter = AsyncWaiter(asyncio.get_running_loop())
        present, value = self._register(key, waiter)
        if present:
            return value
        try:
            async with asyncio.timeout(timeout):
                return await waiter.future
        except TimeoutError:
            present, value = self._unregister(key, waiter)
            if present:
                return value
            raise _timeout_error(key, timeout) from None
        except BaseException:  # cancelled: stop waiting
            self._unregister(key, waiter)
            raise
