"""What an AG-UI stream does with each event kind of a run: the AG-UI events it becomes, or why it is dropped.

An AG-UI stream sends ``RUN_STARTED`` (and the thread's snapshots), then the run's stored events as AG-UI events,
then the end from the settled row: ``RUN_FINISHED`` (its outcome ``success``, ``interrupt`` for a parked run,
``cancelled``) or ``RUN_ERROR``. :data:`AGUI_EVENTS` says, for every kind, which :class:`Agui` action
:class:`~robotlab_django.agui.translate.Translator` takes, or why the kind is left out. An extension's kind is left
out too.
"""

from __future__ import annotations

from enum import Enum
from typing import assert_never

from robotlab.streaming import Dropped, EventKind, Handled, Handling, handling_table

__all__ = ["AGUI_EVENTS", "Agui"]


class Agui(Enum):
    """What :class:`~robotlab_django.agui.translate.Translator` does with a kind it bridges."""

    ATTEMPT = "attempt"
    """A run's (a task row's) attempt starts: text and tool calls it repeats are not sent twice."""
    TEXT = "text"
    """Text of an assistant message: ``TEXT_MESSAGE_START`` when none is open in its part, ``TEXT_MESSAGE_CONTENT``."""
    RESPONSE = "response"
    """A model response ended: the tool calls after it belong to its message."""
    TOOL_CALL = "tool call"
    """``TEXT_MESSAGE_END`` of the open message, then ``TOOL_CALL_START``, ``TOOL_CALL_ARGS``, ``TOOL_CALL_END``."""
    TOOL_RESULT = "tool result"
    """``TOOL_CALL_RESULT``."""
    STEP_STARTED = "step started"
    """``SUBAGENT_STARTED`` and ``STEP_STARTED`` of a network's task."""
    STEP_ENDED = "step ended"
    """``TEXT_MESSAGE_END``, ``STEP_FINISHED`` and ``SUBAGENT_FINISHED`` (``SUBAGENT_ERROR`` for a failed task)."""
    QUESTION = "question"
    """Nothing yet: remembers the tool call a question stops at, for the interrupt of ``RUN_FINISHED``."""


_RESERVED = "reserved: RobotLab's name, which robotlab does not emit"


def _agui(kind: EventKind) -> Handling[Agui]:
    match kind:
        case "run.started":
            return Handled(Agui.ATTEMPT, "a lost worker's (or a resumed run's) new attempt: what it repeats is not "
                                         "sent again; text it says otherwise starts a new message")
        case "text.delta":
            return Handled(Agui.TEXT, "TEXT_MESSAGE_START (when its part has none open) and TEXT_MESSAGE_CONTENT; a "
                                      "network task's carry its subagentRunId")
        case "usage.updated":
            return Handled(Agui.RESPONSE, "ends a model response: its tool calls join its message; RUN_FINISHED "
                                          "carries the run's token totals from the settled row")
        case "tool_call.started":
            return Handled(Agui.TOOL_CALL, "TOOL_CALL_START, TOOL_CALL_ARGS and TOOL_CALL_END, after the "
                                           "TEXT_MESSAGE_END of its message")
        case "tool_call.completed":
            return Handled(Agui.TOOL_RESULT, "TOOL_CALL_RESULT")
        case "step.started":
            return Handled(Agui.STEP_STARTED, "SUBAGENT_STARTED and STEP_STARTED of the task (and, on a task row, "
                                              "an attempt)")
        case "step.completed" | "step.failed":
            return Handled(Agui.STEP_ENDED, "STEP_FINISHED, then SUBAGENT_FINISHED (SUBAGENT_ERROR when it failed)")
        case "hitl.requested":
            return Handled(Agui.QUESTION, "the interrupt of RUN_FINISHED, from the parked row, names the tool call "
                                          "it stops at")
        case "hitl.resolved":
            return Dropped("the answer is the client's own resume entry; the tool's TOOL_CALL_RESULT follows")
        case "run.completed":
            return Dropped("RUN_FINISHED (outcome success, the reply as its result) is sent from the settled row")
        case "run.failed":
            return Dropped("RUN_ERROR is sent from the settled row, its error as an end user reads it")
        case "run.cancelled":
            return Dropped("RUN_FINISHED (outcome cancelled) is sent from the settled row")
        case "stream.ended":
            return Dropped("it ends following the run's events; the end is sent from the settled row")
        case ("run.interrupted" | "part.created" | "part.completed" | "part.failed" | "tool_call.arguments.delta"
              | "tool_call.output.delta" | "reasoning.delta" | "data.delta" | "metadata.updated"):
            return Dropped(_RESERVED)
        case _:
            assert_never(kind)


#: The AG-UI stream's handling of every kind.
AGUI_EVENTS: dict[str, Handling[Agui]] = handling_table("AG-UI stream", _agui)
