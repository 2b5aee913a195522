"""What a run executes: the app's robots and networks, built fresh with the app's settings, as :class:`Work`.

Robots and networks are both :class:`robotlab.Runnable`. :func:`prepare` turns a claimed
:class:`~robotlab_django.models.RobotResult` row into the :class:`Work` it runs: the runnable built
from the registry with the thread's history restored (:class:`RobotWork` for a robot, with its LLM and
tool calls checkpointed; :class:`~robotlab_django.networks.NetworkTurn` for a network), the message it
gets, and how its result becomes the row's :class:`~robotlab_django.records.Outcome`.
:func:`robotlab_django.runner.aexecute` runs any :class:`Work` the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from robotlab.network import Network
from robotlab.robot import Robot
from robotlab.streaming import Event
from robotlab.tools.parking import ParkingChannel

from . import checkpoints
from .chat_history import load_history
from .conf import app_settings
from .networks import NetworkTurn
from .records import Outcome, get_thread, outcome_fields
from .registry import RegisteredNetwork, registry

__all__ = ["RobotWork", "Work", "build_network", "build_robot", "prepare", "restore_robot"]


class Work(Protocol):
    """One row's unit of work: a runnable ready to run, and how its result is stored."""

    #: The message the runnable is given (``None`` continues without one).
    message: Any

    async def arun(self, message: Any, *, run_id: str, on_event: Callable[[Event], Any]) -> Any:
        """Run on ``message``, streaming events to ``on_event`` under ``run_id``; the runnable's result."""

    def completed(self, row: Any, value: Any, elapsed: float) -> Outcome:
        """What ``row`` stores once the run returned ``value`` after ``elapsed`` seconds."""

    def partial(self) -> dict[str, Any]:
        """What ``row`` stores of the run so far (messages, tokens) when it raised."""


class RobotWork:
    """A robot run on a row: the robot holds the thread's history; the row stores what the run appended.

    Args:
        robot: The robot, freshly built, its history restored.
        message: The message it gets.
        history_length: How many of its messages are the restored history.
        attachments: The files sent with the message (the row's stored ``attachments``).
    """

    def __init__(self, robot: Robot, message: Any, history_length: int, attachments: Sequence[Any] = ()) -> None:
        self.robot = robot
        self.message = message
        self.history_length = history_length
        self.attachments = list(attachments)

    async def arun(self, message: Any, *, run_id: str, on_event: Callable[[Event], Any]) -> Any:
        """``robot.arun(message, run_id=..., on_event=..., attachments=...)`` (the row's attachments)."""
        return await self.robot.arun(message, run_id=run_id, on_event=on_event, attachments=self.attachments)

    def completed(self, row: Any, value: Any, elapsed: float) -> Outcome:
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


def _apply_defaults(built: Any) -> Any:
    """``ROBOTLAB["DEFAULT_MODEL"]`` and ``["MAX_TOOL_ROUNDS"]`` where the robot left them unset."""
    default_model = app_settings.DEFAULT_MODEL
    if default_model and built.config.model is None:
        built.with_model(default_model)
    max_rounds = app_settings.MAX_TOOL_ROUNDS
    if max_rounds is not None and built.config.max_tool_rounds is None:
        built.config.set("max_tool_rounds", max_rounds)
    return built


def build_robot(robot: Any, *, llm: Any = None, **options: Any) -> Any:
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
    llm = app_settings.app_llm() if llm is None else llm
    if llm is not None:
        options["llm"] = llm
    built: Network = entry.build(**options)
    for task in built.tasks.values():
        if isinstance(task.robot, Robot):
            _apply_defaults(task.robot)
    return built


def restore_robot(thread: Any, robot: Any = None, *, llm: Any = None, **options: Any) -> Any:
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


def prepare(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None) -> Work:
    """The :class:`Work` of the claimed ``row``: its robot or network, built with the thread's history before it.

    This is where a row says what it runs: a robot's or network's row by its ``robot_name``. A row of
    one task of a network turn (its robot, its message made from its dependencies' results) is a
    :class:`RobotWork` too, so :func:`robotlab_django.runner.aexecute` runs and stores it like any robot run.

    Args:
        row: The claimed (``running``) result row.
        llm: The LLM to use (see :func:`build_robot`).
        options: More keyword arguments for the robot's or network's factory.

    Raises:
        UnknownRobotError: ``row.robot_name`` names no robot or network any more.
    """
    message = row.input or None
    if registry.is_network(row.robot_name):
        network = build_network(row.robot_name, llm=llm, **dict(options or {}))
        seen: set[int] = set()
        for block, task in enumerate(network.tasks.values(), 1):
            if isinstance(task.robot, Robot) and id(task.robot) not in seen:
                seen.add(id(task.robot))
                task.robot.ask_channel = ParkingChannel(row.answers or [])
                # a resumed turn (an answer, a lost worker) replays each robot's completed steps
                checkpoints.attach(task.robot, row, block=block)
        return NetworkTurn(network, load_history(row.thread_id, before=row.sequence_number), message,
                           attachments=row.attachments or [])
    robot = build_robot(row.robot_name, llm=llm, **dict(options or {}))
    history = load_history(row.thread_id, before=row.sequence_number)
    robot.replace_messages(history)
    checkpoints.attach(robot, row)  # an execution after a lost worker replays the steps already done
    robot.ask_channel = ParkingChannel(row.answers or [])  # AskUser parks the run; the answer resumes it
    return RobotWork(robot, message, len(history), row.attachments or [])
