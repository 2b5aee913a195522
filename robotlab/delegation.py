"""The promise a robot's asynchronous ``delegate`` returns: :class:`DelegationFuture`.

The delegated run happens on a worker thread, which settles the future with
:meth:`~DelegationFuture.resolve` or :meth:`~DelegationFuture.reject`. The caller polls
:attr:`~DelegationFuture.is_resolved`, blocks on :meth:`~DelegationFuture.value` (alias
:meth:`~DelegationFuture.wait`), or, in async code, awaits :meth:`~DelegationFuture.avalue` (or the
future itself) without blocking the event loop::

    analysis = f1.value()          # as long as it takes
    draft = f2.value(timeout=30)   # DelegationTimeout after 30 s
    summary = await f3.avalue()    # in a coroutine
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Generator
from types import TracebackType
from typing import Any, ClassVar

from . import errors
from ._ruby import format_number
from .errors import DelegationTimeout

__all__ = ["DelegationFuture", "DelegationTimeout"]


class DelegationFuture:
    """A thread-safe, settle-once-or-more promise for a delegated robot run.

    Args:
        robot_name: the delegatee's name.
        delegated_by: the delegator's name.
    """

    #: Raised by :meth:`value` when its timeout expires (also ``robotlab.errors.DelegationTimeout``).
    DelegationTimeout: ClassVar[type[errors.DelegationTimeout]] = errors.DelegationTimeout

    def __init__(self, *, robot_name: str, delegated_by: str) -> None:
        self._robot_name = robot_name
        self._delegated_by = delegated_by
        self._condition = threading.Condition(threading.Lock())
        self._resolved = False
        self._result: Any = None
        self._error: BaseException | None = None
        self._traceback: TracebackType | None = None
        self._callbacks: list[Callable[[], None]] = []

    @property
    def robot_name(self) -> str:
        """The name of the robot the task was delegated to."""
        return self._robot_name

    @property
    def delegated_by(self) -> str:
        """The name of the robot that delegated it."""
        return self._delegated_by

    @property
    def is_resolved(self) -> bool:
        """Whether the task has finished, successfully or not; never blocks."""
        with self._condition:
            return self._resolved

    # --- waiting ---------------------------------------------------------------------------------

    def value(self, timeout: float | None = None) -> Any:
        """Block until the task finishes and return its result (a ``RobotResult``).

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it takes.

        Raises:
            DelegationTimeout: ``timeout`` passed first
                (``"Delegation to 'analyst' timed out after 10s"``).
            BaseException: whatever the delegated task raised, again on every call.
        """
        with self._condition:
            if not self._condition.wait_for(lambda: self._resolved, timeout):
                raise self._timeout_error(timeout)
            return self._outcome()

    wait = value

    async def avalue(self, timeout: float | None = None) -> Any:
        """Like :meth:`value`, but awaits in the running event loop instead of blocking it."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop has closed; nobody is waiting any more
                pass

        with self._condition:
            if self._resolved:
                return self._outcome()
            self._callbacks.append(wake)
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            raise self._timeout_error(timeout) from None
        finally:
            with self._condition:
                if wake in self._callbacks:
                    self._callbacks.remove(wake)
        with self._condition:
            return self._outcome()

    def __await__(self) -> Generator[Any, None, Any]:
        return self.avalue().__await__()

    # --- settling --------------------------------------------------------------------------------

    def resolve(self, result: object) -> None:
        """Settle the future with ``result`` and wake every waiter (a later settle overwrites it)."""
        self._settle(result, None)

    def reject(self, error: BaseException | type[BaseException]) -> None:
        """Settle the future with ``error`` and wake every waiter (a later settle overwrites it).

        Raises:
            TypeError: ``error`` is not an exception.
        """
        if isinstance(error, type) and issubclass(error, BaseException):
            error = error()
        if not isinstance(error, BaseException):
            raise TypeError(f"reject() needs an exception, got {type(error).__name__}")
        self._settle(None, error)

    def _settle(self, result: object, error: BaseException | None) -> None:
        with self._condition:
            self._result = result
            self._error = error
            self._traceback = error.__traceback__ if error is not None else None
            self._resolved = True
            callbacks, self._callbacks = self._callbacks, []
            self._condition.notify_all()
        for callback in callbacks:
            callback()

    # --- helpers ---------------------------------------------------------------------------------

    def _outcome(self) -> Any:
        if self._error is not None:
            # Re-raise from the stored traceback each time, so repeated calls don't lengthen it.
            raise self._error.with_traceback(self._traceback)
        return self._result

    def _timeout_error(self, timeout: float | None) -> errors.DelegationTimeout:
        return DelegationTimeout(f"Delegation to '{self._robot_name}' timed out after {format_number(timeout)}s")

    def __repr__(self) -> str:
        state = "resolved" if self.is_resolved else "pending"
        return f"<DelegationFuture robot_name={self._robot_name!r} delegated_by={self._delegated_by!r} {state}>"

