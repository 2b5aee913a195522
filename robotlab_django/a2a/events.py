"""What an A2A stream does with each event kind of a run: bridged into the task's artifacts, or dropped, and why.

``message/stream`` (and ``tasks/resubscribe``) sends the task, a ``working`` status update, the reply's text as
chunks of artifacts (``reply``; a network task's ``task-<name>``), then the final status update from the settled
row. Of the run's events it bridges only what :class:`~robotlab_django.streaming.streamed_text.StreamedText`
makes text of; :data:`A2A_EVENTS` says why each other kind is left out. An extension's kind is left out too.
"""

from __future__ import annotations

from typing import assert_never

from robotlab.streaming import Dropped, EventKind, Handled, Handling
from robotlab_django.streaming.streamed_text import Streamed, bridge_table

__all__ = ["A2A_EVENTS"]


def _a2a(kind: EventKind) -> Handling[Streamed]:
    match kind:
        case "text.delta":
            return Handled(Streamed.TEXT, "a chunk of the artifact 'reply' (a network task's: 'task-<name>')")
        case "run.started" | "step.started":
            return Handled(Streamed.ATTEMPT, "a lost worker's new attempt sends no text twice; text it says "
                                             "otherwise is sent again whole (append false)")
        case "run.completed":
            return Dropped("the final status update (completed) is sent from the settled row, with the reply "
                           "artifact when no task streamed it")
        case "run.failed":
            return Dropped("the final status update (failed) is sent from the settled row")
        case "run.cancelled":
            return Dropped("the final status update (canceled) is sent from the settled row")
        case "hitl.requested":
            return Dropped("the final status update is input-required, its message the question, from the parked row")
        case "hitl.resolved":
            return Dropped("the answer is the client's own follow-up message on the task")
        case "tool_call.started" | "tool_call.completed":
            return Dropped("the task's artifacts are its text; tool calls show on the chat page and the admin")
        case "usage.updated":
            return Dropped("an A2A task carries no token counts")
        case "step.completed" | "step.failed":
            return Dropped("a network task's text is its artifact; the final status update says how the run ended")
        case "stream.ended":
            return Dropped("it ends following the run's events; the final status update is sent from the settled row")
        case ("run.interrupted" | "part.created" | "part.completed" | "part.failed" | "tool_call.arguments.delta"
              | "tool_call.output.delta" | "reasoning.delta" | "data.delta" | "metadata.updated"):
            return Dropped("reserved: RobotLab's name, which robotlab does not emit")
        case _:
            assert_never(kind)


#: The A2A stream's handling of every kind.
A2A_EVENTS: dict[str, Handling[Streamed]] = bridge_table("A2A stream", _a2a)
