"""The events of a network's tasks as a turn's stream carries them: rewritten here, for both kinds of turn.

A turn run in one process (:class:`~robotlab_django.networks.turn.NetworkTurn`) and a task run as its own job
(:mod:`robotlab_django.networks.distributed`) send their tasks' events through one :class:`TaskEvents`, which
handles each kind as :data:`REWRITES` says:

- a task's robot's own ``run.*`` events are left out (its ``step.*`` stand for them on a page, which shows one
  run; the core ends the step of a robot that failed with ``step.failed``), and record the robot's input
  (``run.started``) and failure (``run.failed``);
- ``usage.updated`` records what each robot has paid so far (a task that fails or is stopped still records
  every token);
- the rest goes on as it came, numbered from the task's block (``base``).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, assert_never

from robotlab.streaming import (
    Event,
    EventKind,
    Handled,
    Handling,
    RunFailed,
    RunStarted,
    StreamEvent,
    handling_table,
    parse_event,
)

__all__ = ["REWRITES", "Rewrite", "TaskEvents"]


class Rewrite(Enum):
    """What :class:`TaskEvents` does with a kind."""

    ROBOT_RUN = "robot run"
    """A task's robot's ``run.*``: recorded, left out."""
    ROBOT_CANCELLED = "robot cancelled"
    """A task's robot's ``run.cancelled``: left out by a task's job (its row sends its own), else passed on."""
    USAGE = "usage"
    """Recorded as the robot's paid so far, and passed on."""
    PASS = "pass"
    """Passed on as it came (renumbered)."""


def _rewrite(kind: EventKind) -> Handling[Rewrite]:
    match kind:
        case "run.started" | "run.completed" | "run.failed":
            return Handled(Rewrite.ROBOT_RUN, "a task's robot's own run is left out (its step.* stand for it); "
                                              "its input and failure are recorded")
        case "run.cancelled":
            return Handled(Rewrite.ROBOT_CANCELLED, "a task's robot's: a task job leaves it out (the task row sends "
                                                    "its own when it stops); a one-process turn passes it on")
        case "usage.updated":
            return Handled(Rewrite.USAGE, "what the robot paid so far is kept for its row, and the event passed on")
        case ("step.started" | "step.completed" | "step.failed" | "text.delta" | "tool_call.started"
              | "tool_call.completed" | "hitl.requested" | "hitl.resolved" | "stream.ended"):
            return Handled(Rewrite.PASS, "passed on (numbered in the task's block)")
        case ("run.interrupted" | "part.created" | "part.completed" | "part.failed" | "tool_call.arguments.delta"
              | "tool_call.output.delta" | "reasoning.delta" | "data.delta" | "metadata.updated"):
            return Handled(Rewrite.PASS, "reserved: passed on should a robot emit it")
        case _:
            assert_never(kind)


#: What :class:`TaskEvents` does with each kind (a kind no table names is passed on).
REWRITES: dict[str, Handling[Rewrite]] = handling_table("network task rewriter", _rewrite)
#: The kinds :class:`TaskEvents` does more with than pass them on, and what.
_ACTIONS: dict[str, Rewrite] = {kind: handling.action for kind, handling in REWRITES.items()
                                if isinstance(handling, Handled) and handling.action is not Rewrite.PASS}


class TaskEvents:
    """A network's ``on_event`` (or one task's) that rewrites its tasks' events (module docs) into ``sink``.

    Args:
        sink: Receives the events the turn's stream carries.
        inputs: Filled with each robot's input (robot name -> its message).
        failures: Filled with each failed robot's ``(error, error_type)``.
        base: Added to every event's ``seq`` (a task's block in a distributed turn; 0 keeps the events as they are).
        usage: Filled with each robot's last ``usage.updated`` payload (robot name -> data), when given.
        own_cancel: The task's row sends its own ``run.cancelled`` (a task's job): its robot's is left out.
    """

    def __init__(self, sink: Callable[[Event], Any], inputs: dict[str, str], failures: dict[str, tuple[str, str]],
                 *, base: int = 0, usage: dict[str, dict[str, Any]] | None = None, own_cancel: bool = False) -> None:
        self.sink = sink
        self.inputs = inputs
        self.failures = failures
        self.base = base
        self.usage = usage
        self.own_cancel = own_cancel

    def __call__(self, event: Event) -> None:
        """Rewrite ``event`` and send what is left of it."""
        action = _ACTIONS.get(event.kind)
        if action is not None and self._rewritten(event, action):
            return
        if self.base:
            event = Event(kind=event.kind, run_id=event.run_id, seq=self.base + event.seq, ts=event.ts,
                          data=event.data)
        self.sink(event)

    def _rewritten(self, event: Event, action: Rewrite) -> bool:
        """Handle ``event`` as ``action`` says; whether that sent it or left it out (else it goes on as it came)."""
        tagged = "task" in event.data  # a task's robot's (a network's own run.* go on)
        if action is Rewrite.ROBOT_RUN and tagged:
            self._record(parse_event(event))
            return True
        if action is Rewrite.ROBOT_CANCELLED:
            return tagged and self.own_cancel
        if action is Rewrite.USAGE and self.usage is not None:
            self.usage[str(parse_event(event).robot or "")] = dict(event.data)
        return False

    def _record(self, event: StreamEvent) -> None:
        robot = str(event.robot or event.task)
        if isinstance(event, RunStarted):
            self.inputs[robot] = "" if event.message is None else str(event.message)
        elif isinstance(event, RunFailed):
            self.failures[robot] = (str(event.error or ""), str(event.error_type or ""))
