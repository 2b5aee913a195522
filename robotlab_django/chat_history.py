"""Loading a thread's chat history from the database, in one ordered query.

Every completed :class:`~robotlab_django.models.RobotResult` stores the chat messages its run
appended (the user turn, assistant replies, tool calls and tool results, in OpenAI format), so
a thread's history is those lists concatenated in ``sequence_number`` order. Failed and
unfinished runs are left out, and so are the rows of a network's robots (``delegated_by`` set):
the network's own row holds the turn. :func:`robotlab_django.runnables.restore_robot` puts the history
into a fresh robot.
"""

from __future__ import annotations

from typing import Any

from . import swappable
from .abstract_models import Status

__all__ = ["load_history"]


def load_history(thread: Any, *, before: int | None = None, robot_name: str | None = None) -> list[dict[str, Any]]:
    """The chat messages of ``thread`` (an instance or a primary key), oldest first.

    Args:
        thread: The thread, or its primary key.
        before: Only runs with a lower sequence number (the history a queued run sees).
        robot_name: Only the runs of this robot.

    Returns:
        OpenAI-format message dicts, without system prompts, ready for ``Robot.replace_messages``.
    """
    pk = getattr(thread, "pk", thread)
    rows = swappable.result_model().objects.filter(thread_id=pk, status=Status.COMPLETED, delegated_by="")
    if before is not None:
        rows = rows.filter(sequence_number__lt=before)
    if robot_name is not None:
        rows = rows.filter(robot_name=robot_name)
    chunks = rows.order_by("sequence_number").values_list("messages", flat=True)
    return [message for chunk in chunks for message in (chunk or [])]
