"""Delegating: one robot has another run a piece of work (``robot.delegate``, ``robot.adelegate``).

A delegated run is the delegatee's ordinary run; its result gets ``duration`` and ``delegated_by`` set.
Called from a tool of a run, it gets that run's ``deps`` unless it names its own. An asynchronous
delegation returns a :class:`~robotlab.delegation.DelegationFuture` at once and settles it when the run ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import TYPE_CHECKING, Any

from ..delegation import DelegationFuture
from ..run_context import current_run_context
from ..runtime import get_loop, run_sync

if TYPE_CHECKING:
    from ..result import RobotResult
    from .core import Robot

__all__ = ["adelegate", "delegate"]

#: Delegated runs in progress on a running event loop (kept referenced until they finish).
_delegations: set[asyncio.Task[Any]] = set()


def _inherit_deps(run_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``run_kwargs`` with the ``deps`` of the run in progress (the delegating one), unless they name their own."""
    current = current_run_context()
    if "deps" not in run_kwargs and current is not None:
        run_kwargs = {**run_kwargs, "deps": current.deps}
    return run_kwargs


def delegate(delegator: str, *, to: Robot, task: object, async_: bool = False,
             **run_kwargs: Any) -> RobotResult | DelegationFuture:
    """Have robot ``to`` run ``task`` (keyword arguments go to its ``run``) on behalf of robot ``delegator``.

    Synchronous by default: returns the delegatee's result with ``duration`` and ``delegated_by`` set.
    Called from a tool of a run, the delegated run gets that run's ``deps`` unless ``deps=`` is given.
    With ``async_=True`` it returns a :class:`DelegationFuture` at once: the run goes on as a task of
    the running event loop (or, called outside one, on RobotLab's background loop) and settles the future.
    """
    run_kwargs = _inherit_deps(run_kwargs)  # read here: the run's context is this thread's, not the loop's
    if not async_:
        return run_sync(adelegate(delegator, to=to, task=task, **run_kwargs))
    future = DelegationFuture(robot_name=str(to.name), delegated_by=delegator)
    work = adelegate(delegator, to=to, task=task, **run_kwargs)
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    job: asyncio.Task[Any] | concurrent.futures.Future[Any]
    if loop is not None:
        job = loop.create_task(work)
        _delegations.add(job)
        job.add_done_callback(_delegations.discard)
    else:
        job = asyncio.run_coroutine_threadsafe(work, get_loop())
    job.add_done_callback(lambda done: _settle(future, done))
    return future


async def adelegate(delegator: str, *, to: Robot, task: object, **run_kwargs: Any) -> RobotResult:
    """:func:`delegate`, awaited: the delegatee's result with ``duration`` and ``delegated_by`` set."""
    started = time.monotonic()
    result: RobotResult = await to.arun(task, **_inherit_deps(run_kwargs))
    result.duration = time.monotonic() - started
    result.delegated_by = delegator
    return result


def _settle(future: DelegationFuture, done: asyncio.Task[Any] | concurrent.futures.Future[Any]) -> None:
    """Settle ``future`` with the outcome of the finished delegated run ``done``."""
    if done.cancelled():
        future.reject(asyncio.CancelledError(f"Delegation to '{future.robot_name}' was cancelled"))
    elif (error := done.exception()) is not None:
        future.reject(error)
    else:
        future.resolve(done.result())
