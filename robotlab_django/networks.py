"""Networks on threads: a registered :class:`robotlab.Network` runs a thread's turn like a robot does.

A thread's ``robot_name`` may name a network (:func:`robotlab_django.registry.register_network`).
Posting a message queues one :class:`~robotlab_django.models.RobotResult` row for it, exactly as for a
robot (:func:`robotlab_django.services.start_run`); the executor's :func:`~robotlab_django.services.execute_run`
sees the network name and calls :func:`execute_network_run`, which

1. builds a fresh network from its factory (``llm=`` from ``ROBOTLAB["LLM"]`` when set; each robot gets
   ``DEFAULT_MODEL``/``MAX_TOOL_ROUNDS`` like an app-built robot) and restores the thread's history into
   every robot, so a specialist sees the conversation so far;
2. runs it with ``network.arun(message, on_event=..., run_id=row.run_id)``: one event stream for the
   turn, stored and sent like a robot's (:mod:`robotlab_django.streaming`): ``run.started``, then for
   each robot that runs ``step.started`` (``task``, ``robot``), its ``text.delta``, ``tool_call.*`` and
   ``usage.updated`` events (tagged with ``task`` and ``robot``), ``step.completed`` (``reply``) or
   ``step.failed`` (``error``, ``error_type``), and last ``run.completed`` (``reply``, ``tasks``) or
   ``run.failed``, then ``stream.ended``. A robot's own ``run.*`` events are left out (its ``step.*``
   events stand for them), so a page that follows the run sees one run;
3. stores the turn: the network's row gets the final reply and the chat messages ``[user, assistant]``
   (the thread's history), and every robot that ran gets a row of its own, delegated by the network
   (``delegated_by`` = the network's name, ``run_id`` = ``<the network row's run_id>.<n>``), with its
   reply, messages, tokens, cost and error. Usage lives on those rows only, so sums over a thread count
   every token once; :func:`step_rows` finds them. Rows delegated by a network are left out of the
   history and of the chat page's turns.

The turn fails (the row is ``failed``) when the network raises, or when the robot whose reply ends the
network failed; a robot failing elsewhere only marks its own row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from robotlab.network import Network
from robotlab.result import RobotResult
from robotlab.robot import Robot
from robotlab.streaming import (
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_STARTED,
    STEP_COMPLETED,
    STEP_FAILED,
    STREAM_ENDED,
    Event,
)
from robotlab.task import FlowResult

from . import services, streaming
from .abstract_models import Status
from .conf import app_settings
from .history import load_history
from .registry import RegisteredNetwork, registry

__all__ = [
    "NetworkTurn",
    "aexecute_network_run",
    "build_network",
    "execute_network_run",
    "step_rows",
]

logger = logging.getLogger("robotlab_django")

_COST_QUANTUM = Decimal("0.00000001")
_ROBOT_LIFECYCLE = (RUN_STARTED, RUN_COMPLETED, RUN_FAILED)


def build_network(network: str | RegisteredNetwork, *, llm: Any = None, **options: Any) -> Network:
    """A fresh network from the registry, with the app's settings applied to its robots.

    Args:
        network: A registered network name, or its entry.
        llm: Passed to the factory as ``llm=``; defaults to the app's (``ROBOTLAB["LLM"]``, else a
            litellm client when ``API_BASE``/``REQUEST_TIMEOUT``/``LLM_MAX_RETRIES`` is set, else none).
        options: More keyword arguments for the factory.

    Raises:
        UnknownNetworkError: no network has that name.
        TypeError: the factory returned something else than a :class:`robotlab.Network`.
    """
    entry = registry.get_network(network) if isinstance(network, str) else network
    llm = services._app_llm() if llm is None else llm
    if llm is not None:
        options["llm"] = llm
    built: Network = entry.build(**options)
    for task in built.tasks.values():
        if isinstance(task.robot, Robot):
            services._apply_defaults(task.robot)
    return built


def step_rows(row: Any) -> Any:
    """The rows of the robots that ran in the network run ``row``, in the order they finished."""
    return (app_settings.result_model().objects
            .filter(thread_id=row.thread_id, delegated_by=row.robot_name, run_id__startswith=f"{row.run_id}.")
            .order_by("sequence_number"))


class NetworkTurn:
    """One network run for a thread's row: the network, the events it streams and what its robots did.

    Args:
        network: The network, freshly built for this run.
        history: The thread's chat history, restored into every robot of the network.
    """

    #: The network's own row holds no chat messages or usage while it runs (its robots' rows do).
    messages: list[dict[str, Any]] = []
    total_input_tokens = 0
    total_output_tokens = 0

    def __init__(self, network: Network, history: list[dict[str, Any]]) -> None:
        self.network = network
        self.history_length = len(history)
        for task in network.tasks.values():
            if isinstance(task.robot, Robot):
                task.robot.replace_messages(history)
        self.inputs: dict[str, str] = {}  # robot name -> the message it was given
        self.failures: dict[str, tuple[str, str]] = {}  # robot name -> (error, error type)
        self._held: list[Event] = []

    def robot(self, name: str) -> Any:
        """The network's robot named ``name`` (a robot name, not a task name), or ``None``."""
        return next((task.robot for task in self.network.tasks.values()
                     if getattr(task.robot, "name", None) == name), None)

    def _listener(self, sink: Callable[[Event], Any]) -> Callable[[Event], None]:
        """The network's ``on_event``: its events go to ``sink``, except a robot's own ``run.*`` events
        (its ``step.*`` events stand for them on the page) and the final ``run.completed``/``stream.ended``,
        held until :meth:`arun` knows whether the robot with the final reply failed."""

        def listen(event: Event) -> None:
            data = event.data
            if event.kind in _ROBOT_LIFECYCLE and "task" in data:
                robot = str(data.get("robot") or data.get("task"))
                if event.kind == RUN_STARTED:
                    self.inputs[robot] = "" if data.get("message") is None else str(data["message"])
                elif event.kind == RUN_FAILED:
                    self.failures[robot] = (str(data.get("error") or ""), str(data.get("error_type") or ""))
            elif event.kind == RUN_COMPLETED or (event.kind == STREAM_ENDED and self._held):
                self._held.append(event)
            elif event.kind == STEP_COMPLETED and str(data.get("robot")) in self.failures:
                error, error_type = self.failures[str(data.get("robot"))]  # the robot's error became its reply
                sink(Event(kind=STEP_FAILED, run_id=event.run_id, seq=event.seq, ts=event.ts,
                           data={**data, "error": error, "error_type": error_type}))
            else:
                sink(event)

        return listen

    def final_failure(self, flow: FlowResult) -> tuple[str, str] | None:
        """``(error, error_type)`` when the robot whose result ends the network failed, else ``None``."""
        value = flow.value
        return self.failures.get(value.robot_name or "") if isinstance(value, RobotResult) else None

    async def arun(self, message: Any, *, run_id: str, on_event: Callable[[Event], Any]) -> FlowResult:
        """Run the network on ``message``, streaming the turn's events to ``on_event`` under ``run_id``."""
        self._held = []
        flow = await self.network.arun(message, on_event=self._listener(on_event), run_id=run_id)
        failure = self.final_failure(flow)
        for event in self._held:
            if failure is not None and event.kind == RUN_COMPLETED:
                event = Event(kind=RUN_FAILED, run_id=event.run_id, seq=event.seq, ts=event.ts,
                              data={"network": self.network.name, "error": failure[0], "error_type": failure[1]})
            on_event(event)
        return flow

    def starter(self, row: Any) -> Callable[[Callable[[Event], Any]], Any]:
        """The coroutine of ``row``'s run, given the event callback (for :func:`.streaming.stream_run`)."""
        return lambda on_event: self.arun(row.input or None, run_id=row.run_id, on_event=on_event)


def _reply(value: Any) -> str:
    reply = value.reply if isinstance(value, RobotResult) else value
    return services._text(reply)


def _cost(result: RobotResult) -> Decimal:
    return Decimal(repr(float(result.cost or 0))).quantize(_COST_QUANTUM)


def _usage_fields(result: RobotResult) -> dict[str, Any]:
    export = result.export()
    return {"output_data": export.get("output", []), "tool_calls_data": export.get("tool_calls", []),
            "stop_reason": result.stop_reason or "", "checksum": result.checksum, "model": result.model or ""}


def _prepare(row: Any, llm: Any, options: Mapping[str, Any]) -> NetworkTurn:
    network = build_network(row.robot_name, llm=llm, **dict(options))
    return NetworkTurn(network, load_history(row.thread_id, before=row.sequence_number))


def _store(row: Any, turn: NetworkTurn, flow: FlowResult, started: float) -> None:
    """Store a row per robot that ran, then the network's row (completed, or failed by its last robot)."""
    thread = app_settings.thread_model().objects.get(pk=row.thread_id)
    ran = [(name, value) for name, value in flow.context.items() if isinstance(value, RobotResult)]
    now = timezone.now()
    with transaction.atomic():
        for index, (name, result) in enumerate(ran, 1):
            robot = turn.robot(name)
            failure = turn.failures.get(name)
            messages = robot.messages[turn.history_length:] if isinstance(robot, Robot) else []
            services.append_result(
                thread, robot_name=name, delegated_by=row.robot_name, run_id=f"{row.run_id}.{index}",
                task_id=row.task_id, input=turn.inputs.get(name, ""), attempts=1, started_at=row.started_at,
                finished_at=now, status=Status.FAILED if failure else Status.COMPLETED,
                reply="" if failure else _reply(result), messages=messages, input_tokens=result.input_tokens,
                output_tokens=result.output_tokens, cost=_cost(result), duration=result.duration,
                error=failure[0] if failure else "", error_type=failure[1] if failure else "",
                **_usage_fields(result))
        failure = turn.final_failure(flow)
        fields: dict[str, Any] = {"duration": time.monotonic() - started, "input_tokens": 0, "output_tokens": 0,
                                  "cost": Decimal(0), "delegated_by": ""}
        if isinstance(flow.value, RobotResult):
            fields.update(_usage_fields(flow.value))
        if failure is not None:
            fields.update(status=Status.FAILED, error=failure[0] or failure[1], error_type=failure[1], messages=[])
            logger.warning("robotlab: network %r failed on thread %s: %s: %s", row.robot_name, row.thread_id,
                           failure[1], failure[0])
        else:
            reply = _reply(flow.value)
            user = [{"role": "user", "content": row.input}] if row.input else []
            fields.update(status=Status.COMPLETED, reply=reply, error="", error_type="",
                          messages=[*user, {"role": "assistant", "content": reply}])
        services._save(row, fields)


def execute_network_run(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None,
                        on_event: Callable[[Any], Any] | None = None, raise_errors: bool = True) -> Any:
    """Run the claimed (``running``) ``row`` of a network and store the turn (see the module docs).

    :func:`robotlab_django.services.execute_run` calls it once it claimed a network's row.

    Returns:
        The row, ``completed`` or ``failed``.

    Raises:
        RunFailedError: the turn failed (the row is stored as ``failed``); not with ``raise_errors=False``.
    """
    started = time.monotonic()
    turn = None
    try:
        turn = _prepare(row, llm, options or {})
        flow = streaming.stream_run(row.thread_id, row.pk, turn.starter(row), on_event=on_event)
    except Exception as exc:
        services._finish_failed(row, exc, turn, 0, started)
        if raise_errors:
            raise services.RunFailedError(row) from exc
        return row
    _store(row, turn, flow, started)
    if raise_errors and row.status == Status.FAILED:
        raise services.RunFailedError(row)
    return row


async def aexecute_network_run(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None,
                               on_event: Callable[[Any], Any] | None = None, raise_errors: bool = True) -> Any:
    """The async :func:`execute_network_run`: database work in a thread, the network on the event loop."""
    started = time.monotonic()
    turn = None
    try:
        turn = await sync_to_async(_prepare)(row, llm, options or {})
        flow = await streaming.astream_run(row.thread_id, row.pk, turn.starter(row), on_event=on_event)
    except Exception as exc:
        await sync_to_async(services._finish_failed)(row, exc, turn, 0, started)
        if raise_errors:
            raise services.RunFailedError(row) from exc
        return row
    await sync_to_async(_store)(row, turn, flow, started)
    if raise_errors and row.status == Status.FAILED:
        raise services.RunFailedError(row)
    return row
