"""What the chat page does with each event kind it receives: the table its script's ``switch`` follows.

The page (``static/robotlab/robotlab.js``) gets every stored event of its thread, live over the websocket or by
polling; its ``handle`` function switches on ``event.kind``. :data:`PAGE_EVENTS` says, for every kind, what that
``switch`` does with it, or why it has no ``case`` for it; a test reads the script's ``case`` labels and holds
them to the kinds this table handles, so a kind added to the events is either drawn or dropped here, knowingly.
An extension's kind falls to the script's ``default`` (ignored).
"""

from __future__ import annotations

from typing import Literal, assert_never

from robotlab.streaming import Dropped, EventKind, Handled, Handling, handling_table

__all__ = ["PAGE_EVENTS", "PageAction"]

#: What the page does with a kind it draws: starts or ends the reply, adds to it, a badge, the question form.
PageAction = Literal["start", "text", "badge", "finish", "question"]

_RESERVED = "reserved: RobotLab's name, which robotlab does not emit"


def _page(kind: EventKind) -> Handling[PageAction]:
    match kind:
        case "run.started":
            return Handled("start", "'thinking…'; again after text (a lost worker's run executed anew) it clears it")
        case "text.delta":
            return Handled("text", "appends to the reply (a parallel robot's text, not the one shown, is skipped)")
        case "tool_call.started" | "tool_call.completed":
            return Handled("badge", "a tool badge, running then done or error")
        case "step.started" | "step.completed" | "step.failed":
            return Handled("badge", "a robot badge of a network's task; the reply shows the robot that started last")
        case "hitl.requested" | "hitl.resolved":
            return Handled("question", "the question's form under the reply, removed once it is settled")
        case "run.completed" | "run.failed" | "run.cancelled":
            return Handled("finish", "ends the reply: a network's final reply, the error, or the text the run kept")
        case "usage.updated":
            return Dropped("the page shows no token counts; the admin and the thread's JSON results have them")
        case "stream.ended":
            return Dropped("the run's run.completed, run.failed or run.cancelled already ended the reply")
        case ("run.interrupted" | "part.created" | "part.completed" | "part.failed" | "tool_call.arguments.delta"
              | "tool_call.output.delta" | "reasoning.delta" | "data.delta" | "metadata.updated"):
            return Dropped(_RESERVED)
        case _:
            assert_never(kind)


#: The page's handling of every kind (a test holds ``robotlab.js``'s ``switch`` to it).
PAGE_EVENTS: dict[str, Handling[PageAction]] = handling_table("chat page", _page)
