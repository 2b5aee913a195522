"""Networks on threads: a registered :class:`robotlab.Network` runs a thread's turn like a robot does.

A thread's ``robot_name`` may name a network (:func:`robotlab_django.registry.register_network`).
Posting a message queues one :class:`~robotlab_django.models.RobotResult` row for it, exactly as for a
robot (:func:`robotlab_django.runs.records.start_run`), and the run executes through the same
:func:`robotlab_django.runs.runner.aexecute` as a robot's: :func:`robotlab_django.runs.runnables.prepare` gives it a
:class:`NetworkTurn`, which

1. is built from a fresh network (:func:`robotlab_django.runs.runnables.build_network`: ``llm=`` from
   ``ROBOTLAB["LLM"]`` when set; each robot gets ``DEFAULT_MODEL``/``MAX_TOOL_ROUNDS`` like an app-built
   robot) with the thread's history restored into every robot, so a specialist sees the conversation so far;
2. runs it with ``network.arun(message, on_event=..., run_id=row.run_id)``: one event stream for the
   turn, stored and sent like a robot's (:mod:`robotlab_django.streaming.event_stream`): ``run.started``, then for
   each robot that runs ``step.started`` (``task``, ``robot``), its ``text.delta``, ``tool_call.*`` and
   ``usage.updated`` events (tagged with ``task`` and ``robot``), ``step.completed`` (``reply``) or
   ``step.failed`` (``error``, ``error_type``), and last ``run.completed`` (``reply``, ``tasks``) or
   ``run.failed``, then ``stream.ended``. A robot's own ``run.*`` events are left out (its ``step.*``
   events stand for them), so a page that follows the run sees one run;
3. gives the turn's :class:`~robotlab_django.runs.records.Outcome`: the network's row gets the final reply and
   the chat messages ``[user, assistant]`` (the thread's history), and every robot that ran gets a row of
   its own, delegated by the network (``delegated_by`` = the network's name, ``run_id`` = ``<the network
   row's run_id>.<n>``), with its reply, messages, tokens, cost and error. Usage lives on those rows
   only, so sums over a thread count every token once; :func:`step_rows` finds them. Rows delegated by a
   network are left out of the history and of the chat page's turns.

The turn fails (the row is ``failed``) when the network raises, or when the robot whose reply ends the
network failed; a robot failing elsewhere only marks its own row.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from robotlab.network import Network
from robotlab.result import RobotResult
from robotlab.robot import Robot
from robotlab.streaming import RUN_COMPLETED, RUN_FAILED, STREAM_ENDED, Event
from robotlab.task import FlowResult
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.networks.task_events import TaskEvents
from robotlab_django.runs.records import Outcome, current_worker, outcome_fields, reply_text

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from robotlab_django.models import RobotResult as ResultRow
    from robotlab_django.runs.deps import RunDeps

__all__ = ["NetworkTurn", "step_rows"]

logger = logging.getLogger("robotlab_django")


def step_rows(row: ResultRow) -> QuerySet[ResultRow]:
    """The rows of the robots that ran in the network run ``row``, in the order they finished."""
    return (swappable.result_model().objects
            .filter(thread_id=row.thread_id, delegated_by=row.robot_name, run_id__startswith=f"{row.run_id}.")
            .order_by("sequence_number"))


class NetworkTurn:
    """One network run for a thread's row: the network, the events it streams and what its robots did.

    Args:
        network: The network, freshly built for this run.
        history: The thread's chat history, restored into every robot of the network.
        message: The turn's message (``None`` continues without one).
        attachments: The files sent with the message, given to every robot's run.
        deps: What every robot's tools get as ``ctx.deps`` (the turn's :class:`~robotlab_django.RunDeps`).
    """

    def __init__(self, network: Network, history: list[dict[str, Any]], message: object = None, *,
                 attachments: Sequence[Any] = (), deps: RunDeps | None = None) -> None:
        self.network = network
        self.message = message
        self.attachments = list(attachments)
        self.deps = deps
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
        """The network's ``on_event``: its tasks' events rewritten (:class:`~.task_events.TaskEvents`) into ``sink``.

        The final ``run.completed`` (and the ``stream.ended`` after it) are held until :meth:`arun` knows whether
        the robot with the final reply failed.
        """

        def send(event: Event) -> None:
            if event.kind == RUN_COMPLETED or (event.kind == STREAM_ENDED and self._held):
                self._held.append(event)  # the network's own: its robots' run.* do not reach here
            else:
                sink(event)

        return TaskEvents(send, self.inputs, self.failures)

    def final_failure(self, flow: FlowResult) -> tuple[str, str] | None:
        """``(error, error_type)`` when the robot whose result ends the network failed, else ``None``."""
        value = flow.value
        return self.failures.get(value.robot_name or "") if isinstance(value, RobotResult) else None

    async def arun(self, message: object, *, run_id: str, on_event: Callable[[Event], Any]) -> FlowResult:
        """Run the network on ``message``, streaming the turn's events to ``on_event`` under ``run_id``."""
        self._held = []
        extra: dict[str, Any] = {"attachments": self.attachments} if self.attachments else {}
        flow = await self.network.arun(message, on_event=self._listener(on_event), run_id=run_id, deps=self.deps,
                                       **extra)
        failure = self.final_failure(flow)
        for event in self._held:
            if failure is not None and event.kind == RUN_COMPLETED:
                event = Event(kind=RUN_FAILED, run_id=event.run_id, seq=event.seq, ts=event.ts,
                              data={"network": self.network.name, "error": failure[0], "error_type": failure[1]})
            on_event(event)
        return flow

    def partial(self) -> dict[str, Any]:
        """What the network's row stores when the turn raised: no messages or usage (its robots' rows hold them)."""
        return {"messages": [], "input_tokens": 0, "output_tokens": 0}

    def completed(self, row: ResultRow, flow: FlowResult, elapsed: float) -> Outcome:
        """The turn's outcome.

        A delegated row per robot that ran, and the network's row (completed, or failed by the robot whose reply
        ends the network).
        """
        ran = [(name, value) for name, value in flow.context.items() if isinstance(value, RobotResult)]
        delegated = [self._robot_row(row, index, name, result) for index, (name, result) in enumerate(ran, 1)]
        value = flow.value
        reply = reply_text(value.reply if isinstance(value, RobotResult) else value)
        user = [{"role": "user", "content": row.input}] if row.input else []
        messages = [*user, {"role": "assistant", "content": reply}]
        fields: dict[str, Any] = {"status": Status.COMPLETED, "reply": reply, "messages": messages, "error": "",
                                  "error_type": ""}
        if isinstance(value, RobotResult):
            fields = outcome_fields(value, messages=messages)
        fields.update(duration=elapsed, input_tokens=0, output_tokens=0, cost=Decimal(0), delegated_by="",
                      turn_state=self.graph_state([name for name, _result in ran]))
        failure = self.final_failure(flow)
        if failure is not None:
            fields.update(status=Status.FAILED, error=failure[0] or failure[1], error_type=failure[1], messages=[])
            fields.pop("reply", None)
            logger.warning("robotlab: network %r failed on thread %s: %s: %s", row.robot_name, row.thread_id,
                           failure[1], failure[0])
        return Outcome(fields, delegated)

    def graph_state(self, robots: list[str]) -> dict[str, Any]:
        """The turn state the admin draws for a turn run in one process: the graph, the tasks that did not run skipped.

        Args:
            robots: The names of the robots that ran (their task rows show their own status).
        """
        last = getattr(self.network, "last_turn", None)  # the turn that ran: who started whom, and why
        state = (last or self.network.turn_state()).to_dict()
        ran = {task for task, spec in self.network.tasks.items() if getattr(spec.robot, "name", None) in robots}
        state["status"] = {task: "completed" if task in ran else "skipped" for task in state["status"]}
        state["results"] = []  # the task rows hold them
        return state

    def _robot_row(self, row: ResultRow, index
: int, name: str, result: RobotResult) -> dict[str, Any]:
        """The columns of the delegated row of robot ``name``, the ``index``-th that ran in the turn ``row``."""
        robot = self.robot(name)
        failure = self.failures.get(name)
        messages = robot.messages[self.history_length:] if isinstance(robot, Robot) else []
        columns = outcome_fields(result, messages=messages)
        task = next((t for t, spec in self.network.tasks.items() if getattr(spec.robot, "name", None) == name), "")
        worker, pid = current_worker()
        columns.update(robot_name=name, delegated_by=row.robot_name, run_id=f"{row.run_id}.{index}",
                       task_id=row.task_id, input=self.inputs.get(name, ""), attempts=1, started_at=row.started_at,
                       finished_at=timezone.now(), task_name=task, parent_id=row.pk, worker=worker,
                       worker_pid=pid)
        if failure is not None:
            columns.update(status=Status.FAILED, reply="", error=failure[0], error_type=failure[1])
        return columns
