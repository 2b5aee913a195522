"""Loading a thread's chat history from the database, in one ordered query.

Every completed :class:`~robotlab_django.models.RobotResult` stores the chat messages its run
appended (the user turn, assistant replies, tool calls and tool results, in OpenAI format), so
a thread's history is those lists concatenated in ``sequence_number`` order. Failed and
unfinished runs are left out, and so are the rows of a network's robots (``delegated_by`` set):
the network's own row holds the turn. A reply a newer message interrupted (``on_busy`` ``"interrupt"``,
:mod:`robotlab_django.runs.busy`: cancelled with ``stop_reason`` ``"interrupted"``) stays in the history as its
user message and the text it had streamed. :func:`robotlab_django.runs.runnables.restore_robot` puts the history
into a fresh robot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db.models import Q

from robotlab_django import swappable
from robotlab_django.abstract_models import Status

if TYPE_CHECKING:
    from robotlab_django.models import Thread

__all__ = ["INTERRUPTED", "load_history"]

#: The ``stop_reason`` of a reply cancelled by a newer message of its thread.
INTERRUPTED = "interrupted"


def load_history(thread: Thread | int, *, before: int | None = None,
                 robot_name: str | None = None) -> list[dict[str, Any]]:
    """The chat messages of ``thread`` (an instance or a primary key), oldest first.

    Args:
        thread: The thread, or its primary key.
        before: Only runs with a lower sequence number (the history a queued run sees).
        robot_name: Only the runs of this robot.

    Returns:
        OpenAI-format message dicts, without system prompts, ready for ``Robot.replace_messages``.
    """
    pk = thread if isinstance(thread, int) else thread.pk
    rows = swappable.result_model().objects.filter(
        Q(status=Status.COMPLETED) | Q(status=Status.CANCELLED, stop_reason=INTERRUPTED), thread_id=pk, delegated_by="")
    if before is not None:
        rows = rows.filter(sequence_number__lt=before)
    if robot_name is not None:
        rows = rows.filter(robot_name=robot_name)
    history: list[dict[str, Any]] = []
    for status, messages, text, reply in rows.order_by("sequence_number").values_list(
            "status", "messages", "input", "reply"):
        if status == Status.COMPLETED:
            history.extend(messages or [])
            continue
        if text:  # interrupted: what the user said, and what the reply had said so far
            history.append({"role": "user", "content": text})
        if reply:
            history.append({"role": "assistant", "content": reply})
    return history
