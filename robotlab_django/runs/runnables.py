"""What a run executes: the app's robots and networks, built fresh with the app's settings, as :class:`Work`.

Robots and networks are both :class:`robotlab.Runnable`. :func:`prepare` turns a claimed
:class:`~robotlab_django.models.RobotResult` row into the :class:`Work` it runs: the runnable built
from the registry with the thread's history restored (:class:`RobotWork` for a robot, with its LLM and
tool calls checkpointed and its side-effecting tool calls journaled; :class:`~robotlab_django.networks.turn.NetworkTurn`
for a network), the message it gets, the run's :class:`~robotlab_django.RunDeps` (the thread's owner, read
now), and how its result becomes the row's :class:`~robotlab_django.runs.records.Outcome`.
:func:`robotlab_django.runs.runner.aexecute` runs any :class:`Work` the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from robotlab.network import Network
from robotlab.robot import Robot
from robotlab.streaming import Event
from robotlab.tools.approval import ParkingApprover
from robotlab.tools.parking import ParkingChannel
from robotlab_django.accounting import admission
from robotlab_django.conf import app_settings
from robotlab_django.networks.turn import NetworkTurn
from robotlab_django.registry import RegisteredNetwork, registry
from robotlab_django.runs import checkpoints, effects, steering
from robotlab_django.runs.deps import RunDeps, for_row
from robotlab_django.runs.history import load_history
from robotlab_django.runs.records import Outcome, get_thread, outcome_fields
from robotlab_django.versions.runs import apply_to_run

if TYPE_CHECKING:
    from robotlab.llm import LLM
    from robotlab.result import RobotResult as Result
    from robotlab_django.models import RobotResult
    from robotlab_django.runs.records import ThreadRef

__all__ = ["RobotWork", "Work", "build_network", "build_robot", "prepare", "restore_robot"]


class Work(Protocol):
    """One row's unit of work: a runnable ready to run, and how its result is stored."""

    #: The message the runnable is given (``None`` continues without one).
    message: object

    async def arun(self, message: object, *, run_id: str, on_event: Callable[[Event], Any]) -> Any:
        """Run on ``message``, streaming events to ``on_event`` under ``run_id``; the runnable's result."""

    def completed(self, row: RobotResult, value: Any, elapsed: float) -> Outcome:
        """What ``row`` stores once the run returned ``value`` after ``elapsed`` seconds.

        ``value`` is what this work's own :meth:`arun` returned (each kind of work has its own result type).
        """

    def partial(self) -> dict[str, Any]:
        """What ``row`` stores of the run so far (messages, tokens) when it raised."""


class RobotWork:
    """A robot run on a row: the robot holds the thread's history; the row stores what the run appended.

    Args:
        robot: The robot, freshly built, its history restored.
        message: The message it gets.
        history_length: How many of its messages are the restored history.
        attachments: The files sent with the message (the row's stored ``attachments``).
        deps: What the robot's tools get as ``ctx.deps``: the run's :class:`~robotlab_django.RunDeps`.
    """

    def __init__(self, robot: Robot, message: object, history_length: int, attachments: Sequence[Any] = (),
                 deps: RunDeps | None = None) -> None:
        self.robot = robot
        self.message = message
        self.history_length = history_length
        self.attachments = list(attachments)
        self.deps = deps

    async def arun(self, message: object, *, run_id: str, on_event: Callable[[Event], Any]) -> Result:
        """``robot.arun(message, run_id=..., on_event=..., attachments=..., deps=...)`` (the row's attachments)."""
        return await self.robot.arun(message, run_id=run_id, on_event=on_event, attachments=self.attachments,
                                     deps=self.deps)

    def completed(self, row: RobotResult, value: Result, elapsed: float) -> Outcome:
        """The robot's result and the chat messages the run appended.

        A row delegated by a network keeps its ``delegated_by``.
        """
        fields = outcome_fields(value, messages=self.robot.messages[self.history_length:])
        fields["delegated_by"] = fields["delegated_by"] or row.delegated_by
        return Outcome(fields)

    def partial(self) -> dict[str, Any]:
        """The messages the run appended and the tokens it used before it raised."""
        return {"messages": self.robot.messages[self.history_length:],
                "input_tokens": self.robot.total_input_tokens, "output_tokens": self.robot.total_output_tokens}


def _apply_defaults(built: Robot) -> Robot:
    """``ROBOTLAB["DEFAULT_MODEL"]`` and ``["MAX_TOOL_ROUNDS"]`` where the robot left them unset."""
    default_model = app_settings.DEFAULT_MODEL
    if default_model and built.config.model is None:
        built.with_model(default_model)
    max_rounds = app_settings.MAX_TOOL_ROUNDS
    if max_rounds is not None and built.config.max_tool_rounds is None:
        built.config.set("max_tool_rounds", max_rounds)
    return built


def build_robot(robot: object, *, llm: LLM | None = None, **options: object) -> Robot:
    """A fresh robot from the registry, with the app's settings applied.

    Args:
        robot: A registered name (``"support"``), or the class or function registered for it.
        llm: The LLM to send requests to; defaults to ``ROBOTLAB["LLM"]``, else a litellm client
            with ``API_BASE``/``REQUEST_TIMEOUT``/``LLM_MAX_RETRIES`` when any is set.
        options: Passed to the robot's factory (``on_content=``, ``model=``...).

    ``ROBOTLAB["DEFAULT_MODEL"]`` and ``["MAX_TOOL_ROUNDS"]`` fill in what the robot leaves unset.

    Raises:
        UnknownRobotError: no robot has that name.
    """
    entry = registry.resolve(robot)
    llm = app_settings.app_llm() if llm is None else llm
    if llm is not None:
        options["llm"] = llm
    return _apply_defaults(entry.build(**options))


def build_network(network: str | RegisteredNetwork, *, llm: LLM | None = None, **options: object) -> Network:
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
    llm = app_settings.app_llm() if llm is None else llm
    if llm is not None:
        options["llm"] = llm
    built: Network = entry.build(**options)
    for task in built.tasks.values():
        if isinstance(task.robot, Robot):
            _apply_defaults(task.robot)
    return built


def restore_robot(thread: ThreadRef, robot: object = None, *, llm: LLM | None = None, **options: object) -> Robot:
    """A fresh robot holding ``thread``'s history, ready to continue the conversation.

    Args:
        thread: A thread, its primary key or its session id.
        robot: The robot to build; defaults to the thread's robot.
        llm: The LLM to use (see :func:`build_robot`).
        **options: More options for the robot's factory.
    """
    thread = get_thread(thread, create=False)
    built = build_robot(robot or thread.robot_name, llm=llm, **options)
    built.replace_messages(load_history(thread))
    return built


def prepare(row: RobotResult, *, llm: LLM | None = None, options
: Mapping[str, Any] | None = None,
            gate: admission.RunGate | None = None) -> Work:
    """The :class:`Work` of the claimed ``row``: its robot or network, built with the thread's history before it.

    This is where a row says what it runs: a robot's or network's row by its ``robot_name``; a robot runs
    the version of it the row pins or its thread gets (:mod:`robotlab_django.versions`), recorded on the row. A row of
    one task of a network turn (its robot, its message made from its dependencies' results) is a
    :class:`RobotWork` too, so :func:`robotlab_django.runs.runner.aexecute` runs and stores it like any robot run.
    And for whom: the thread's owner, read from the database now (:func:`robotlab_django.runs.deps.for_row`),
    whatever door queued the run and however often it is executed again.

    Args:
        row: The claimed (``running``) result row.
        llm: The LLM to use (see :func:`build_robot`).
        options: More keyword arguments for the robot's or network's factory.
        gate: The run's daily budgets: each model call of its robots reserves there first
            (:mod:`robotlab_django.accounting.admission`).

    Raises:
        UnknownRobotError: ``row.robot_name`` names no robot or network any more.
        InactiveUserError: the thread's owner was deactivated.
    """
    message = row.input or None
    deps = for_row(row)
    if registry.is_network(row.robot_name):
        network = build_network(row.robot_name, llm=llm, **dict(options or {}))
        seen: set[int] = set()
        for block, task in enumerate(network.tasks.values(), 1):
            if isinstance(task.robot, Robot) and id(task.robot) not in seen:
                seen.add(id(task.robot))
                task.robot.ask_channel = ParkingChannel(row.answers or [])
                task.robot.approver = ParkingApprover(row.answers or [])
                admission.attach(task.robot, gate)
                # a resumed turn (an answer, a lost worker) replays each robot's completed steps
                checkpoints.attach(task.robot, row, block=block)
                effects.attach(task.robot, row, deps, block=block)
        return NetworkTurn(network, load_history(row.thread_id, before=row.sequence_number), message,
                           attachments=row.attachments or [], deps=deps)
    robot = build_robot(row.robot_name, llm=llm, **dict(options or {}))
    apply_to_run(robot, row)  # the version pinned or chosen for the thread, recorded on the row
    history = load_history(row.thread_id, before=row.sequence_number)
    robot.replace_messages(history)
    admission.attach(robot, gate)
    checkpoints.attach(robot, row)  # an execution after a lost worker replays the steps already done
    effects.attach(robot, row, deps)  # and never repeats a side effect
    robot.ask_channel = ParkingChannel(row.answers or [])  # AskUser parks the run; the answer resumes it
    robot.approver = ParkingApprover(row.answers or [])  # so does a call to approve (robotlab_django.runs.approvals)
    steering.attach(robot, row)  # on_busy "steer": messages sent meanwhile join at its next model call
    return RobotWork(robot, message, len(history), row.attachments or [], deps)
