"""Running a network's tasks: one task with its ``step.*`` events, and a whole turn in one process.

:func:`run_task` runs ONE task of a turn, the unit a distributed executor hands to a worker.
:class:`LocalTurn` runs a whole turn on the running event loop: a loop over the
:class:`~robotlab.network.turn.TurnState` that starts every task it makes ready as an asyncio task, up to
the network's concurrency limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import streaming, telemetry
from ..errors import BudgetExceeded
from ..result import RobotResult
from ..streaming import Event, EventEmitter, failure_data
from ..task import FlowResult, Task, error_result, extract_run_context
from .turn import TurnState

if TYPE_CHECKING:
    from .core import Network

__all__ = ["LocalTurn", "relay", "reply_of", "run_nested", "run_task"]


def reply_of(value: object) -> Any:
    """The reply of a task's value when it is a RobotResult, else ``None``."""
    return value.reply if isinstance(value, RobotResult) else None


def relay(emitter: EventEmitter, **tags: Any) -> Callable[[Event], None]:
    """A task's ``on_event``.

    Its runnable's events go on into the network run's stream (the network's ``run_id`` and ``seq``) with ``tags``
    added where the event has no such key, and without the runnable's own ``stream.ended`` (the network ends the
    stream).
    """

    def forward(event: Event) -> None:
        if event.kind != streaming.STREAM_ENDED:
            emitter.emit(event.kind, **{**tags, **event.data})

    return forward


async def run_task(network: Network, task: Task, flow: FlowResult, emitter: EventEmitter | None) -> FlowResult:
    """Run one task on ``flow``.

    With an emitter, between ``step.started`` and ``step.completed`` (or ``step.failed``), its runnable's events
    relayed in between. A task whose robot failed (its ``run.failed``: the error became its reply, so the network
    goes on) ends with ``step.failed``, carrying that ``reply`` and the robot's ``error``, ``error_type`` and
    ``error_kind``.

    Raises:
        TypeError: the runnable's ``call`` returned something else than a FlowResult.
        BaseException: whatever the task raised (cancellation too), after ``step.failed``.
    """
    tags = {"network": network.name, "task": task.name, "robot": getattr(task.robot, "name", None)}
    failure: dict[str, object] = {}  # what its runnable's last run.failed said (:func:`_watch`)
    if emitter is not None:
        on_event = _watch(relay(emitter, **tags), failure, tags["robot"])
        params = {**(flow.context.get("run_params") or {}), "on_event": on_event}
        flow = flow.with_context("run_params", params)
        emitter.emit(streaming.STEP_STARTED, **tags)
    try:
        result = await task.call(flow)
        if not isinstance(result, FlowResult):
            raise TypeError(f"Task '{task.name}': {task.robot!r}.call() must return a FlowResult, got {result!r}")
    except BaseException as exc:  # cancelled too (another task failed), so every step.started is closed
        if emitter is not None:
            emitter.emit(streaming.STEP_FAILED, **tags, **failure_data(exc))
        raise
    if emitter is not None:
        ended = streaming.STEP_FAILED if failure else streaming.STEP_COMPLETED
        emitter.emit(ended, **tags, reply=reply_of(result.value), **failure)
    return result


def _watch(forward: Callable[[Event], None], failure: dict[str, object], name: str | None) -> Callable[[Event], None]:
    """``forward``, noting in ``failure`` what the last run of the task's runnable (named ``name``) said of its error.

    Only the runnable's own ``run.*`` count: a robot's carry its ``robot``, a nested network's its ``network``, and
    neither a ``task`` (those of a nested network's tasks do); a run it started of another robot does not.
    """

    def watch(event: Event) -> None:
        own = "task" not in event.data and event.data.get("robot", event.data.get("network")) == name
        if own and event.kind in (streaming.RUN_STARTED, streaming.RUN_COMPLETED, streaming.RUN_FAILED):
            failure.clear()
            if event.kind == streaming.RUN_FAILED:
                failure.update({key: event.data[key] for key in _FAILURE_KEYS if key in event.data})
        forward(event)

    return watch


#: What a ``step.failed`` takes of its robot's ``run.failed`` (:class:`~robotlab.streaming.FailureData`).
_FAILURE_KEYS = ("error", "error_type", "error_kind")


class LocalTurn:
    """One turn of ``network`` run in this process.

    Args:
        network: The network.
        state: A fresh turn state (:meth:`Network.turn_state <robotlab.network.Network.turn_state>`).
        run_params: The run parameters every task sees.
        emitter: The run's event stream, or ``None``.
    """

    def __init__(self, network: Network, state: TurnState, run_params: dict[str, Any],
                 emitter: EventEmitter | None = None) -> None:
        self.network = network
        self.state = state
        self.run_params = run_params
        self.emitter = emitter
        self.running: dict[asyncio.Future[FlowResult], str] = {}
        limit = network.concurrency_limit
        self.semaphore = asyncio.Semaphore(limit) if limit else None

    async def execute(self) -> FlowResult:
        """Run the turn to its end, inside its ``invoke_workflow`` span, and return its final result.

        Raises:
            BaseException: what a task raised (the other tasks are cancelled first), or a routing error.
        """
        run_id = self.emitter.run_id if self.emitter is not None else None
        return await telemetry.invoke_workflow(self.network.name, self._execute(), run_id=run_id)

    async def _execute(self) -> FlowResult:
        order = list(self.state.dependencies)
        try:
            while True:
                for name in await self.state.advance(self.network.router, self.run_params):
                    flow = self.state.input(name, self.run_params)
                    self.running[asyncio.ensure_future(self.call(self.network.tasks[name], flow))] = name
                if not self.running:
                    break
                done, _ = await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
                for future in sorted(done, key=lambda f: order.index(self.running[f])):
                    name = self.running.pop(future)
                    try:
                        result = future.result()
                    except BaseException as exc:
                        self.state.fail(name, exc)
                        raise
                    self.state.complete(name, result)
        finally:
            for future in self.running:
                future.cancel()
            if self.running:  # let them finish being cancelled before the run reports its end
                await asyncio.wait(self.running)
        return self.state.final(self.run_params)

    async def call(self, task: Task, flow: FlowResult) -> FlowResult:
        """Run ``task`` within the concurrency limit."""
        if self.semaphore is None:
            return await run_task(self.network, task, flow, self.emitter)
        async with self.semaphore:
            return await run_task(self.network, task, flow, self.emitter)


async def run_nested(network: Network, result: FlowResult) -> FlowResult:
    """``network`` as one step of another network (what :meth:`Network.call <robotlab.network.Network.call>` does).

    Its run's exception becomes an error result.
    """
    message, options = extract_run_context(result)
    options.pop("task", None)  # the outer task: the inner tasks set their own
    try:
        inner = await network.arun(message, **options)
    except Exception as exc:
        if isinstance(exc, BudgetExceeded) and exc.scope is not None:  # a network budget is spent
            raise
        failed = error_result(network.name, exc)
        inner = FlowResult(failed, context={"run_params": result.context.get("run_params") or {}},
                           errors={network.name: [str(failed.reply)]})
    step = result.with_context(network.name, inner).continue_(inner.value)
    for key, messages in inner.errors.items():
        for text in messages:
            step = step.with_error(key, text)
    return step
