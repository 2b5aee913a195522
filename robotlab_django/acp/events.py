"""What an ACP stream does with each event kind of a run: bridged into the agent's message, or dropped, and why.

An ACP stream (``POST /runs`` in ``stream`` mode, and ``GET /runs/{id}/events``) sends ``run.created``,
``run.in-progress``, the agent's message as ``message.part`` events, then ``message.completed`` and the final
``run.*`` event, both from the settled row. Of the run's events it bridges only what
:class:`~robotlab_django.streaming.streamed_text.StreamedText` makes text of; :data:`ACP_EVENTS` says why each
other kind is left out. An extension's kind is left out too.
"""

from __future__ import annotations

from typing import assert_never

from robotlab.streaming import Dropped, EventKind, Handled, Handling
from robotlab_django.streaming.streamed_text import Streamed, bridge_table

__all__ = ["ACP_EVENTS"]


def _acp(kind: EventKind) -> Handling[Streamed]:
    match kind:
        case "text.delta":
            return Handled(Streamed.TEXT, "a message.part of the agent's message (a network's tasks' text too)")
        case "run.started" | "step.started":
            return Handled(Streamed.ATTEMPT, "a lost worker's new attempt sends no text twice; text it says "
                                             "otherwise starts the message again (message.created)")
        case "run.completed":
            return Dropped("message.completed and run.completed are sent from the settled row")
        case "run.failed":
            return Dropped("run.failed is sent from the settled row, its error as an end user reads it")
        case "run.cancelled":
            return Dropped("run.cancelled is sent from the settled row")
        case "hitl.requested":
            return Dropped("an awaiting run's stream ends with run.awaiting, whose await_request is the question")
        case "hitl.resolved":
            return Dropped("the answer is the client's own await_resume")
        case "tool_call.started" | "tool_call.completed":
            return Dropped("the agent's message has text parts only; tool calls show on the chat page and the admin")
        case "usage.updated":
            return Dropped("an ACP run carries no token counts")
        case "step.completed" | "step.failed":
            return Dropped("a network's tasks stream into one agent message; the final run.* event says how it ended")
        case "stream.ended":
            return Dropped("it ends following the run's events; the final run.* event is sent from the settled row")
        case ("run.interrupted" | "part.created" | "part.completed" | "part.failed" | "tool_call.arguments.delta"
              | "tool_call.output.delta" | "reasoning.delta" | "data.delta" | "metadata.updated"):
            return Dropped("reserved: RobotLab's name, which robotlab does not emit")
        case _:
            assert_never(kind)


#: The ACP stream's handling of every kind.
ACP_EVENTS: dict[str, Handling[Streamed]] = bridge_table("ACP stream", _acp)
