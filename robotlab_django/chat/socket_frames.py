"""What the thread websocket does on the database: reads tried twice, stored events, and the frames that act.

:class:`~robotlab_django.chat.consumers.ThreadConsumer` runs these in a worker thread
(``database_sync_to_async``): the reads of stored events for a replay or a lost batch (:func:`stored_after`,
:func:`stored_between`, :func:`newest`, each through :func:`read`, which tries once more on a fresh connection when
the first one broke), and the frames that act on a run: a ``message`` queues one (:func:`queue_run`), an
``answer``, ``cancel`` or ``approval`` steers one (:func:`control_run`). Both check the socket's session as stored
now first (:func:`~robotlab_django.chat.revocation.still_allowed`) and return ``None`` when it no longer may see
the thread; otherwise the frame to send back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from channels.db import database_sync_to_async
from django.db import InterfaceError, OperationalError, close_old_connections
from django.db.models import Max

from robotlab_django import swappable
from robotlab_django.chat.access import default_robot
from robotlab_django.chat.revocation import still_allowed

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser
    from django.contrib.sessions.backends.base import SessionBase

__all__ = ["CONTROLLED", "DATABASE_ERRORS", "control_run", "newest", "queue_run", "read", "stored_after",
           "stored_between", "text_problem"]

#: The errors of a database connection that broke (the server dropped it, a failover, a restart).
DATABASE_ERRORS = (OperationalError, InterfaceError)

logger = logging.getLogger("robotlab_django")
T = TypeVar("T")
P = ParamSpec("P")


async def read(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``database_sync_to_async(function)(*args)`` for a read, tried once more when the connection broke.

    A connection the server dropped fails its first query; the second try closes the connections that
    failed (``close_old_connections``: a health check of each) and runs on a fresh one.
    """
    try:
        return cast(T, await database_sync_to_async(function)(*args, **kwargs))
    except DATABASE_ERRORS as exc:
        logger.info("robotlab: a socket's database read failed (%s); trying once more on a fresh connection", exc)
        return cast(T, await database_sync_to_async(_on_fresh_connection)(function, *args, **kwargs))


def _on_fresh_connection(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    close_old_connections()  # Channels' own call around each handler may be off (its test communicator)
    return function(*args, **kwargs)


def stored_after(thread_id: int, after: int, limit: int) -> list[tuple[Any, dict[str, Any]]]:
    """The thread's stored events after cursor ``after``: ``(their run's RobotResult pk, event)``."""
    rows = swappable.event_model().objects.filter(thread_id=thread_id, pk__gt=after).order_by("pk")[:limit]
    return [(row.result_id, {**row.to_dict(), "cursor": row.pk}) for row in rows]


def newest(thread_id: int) -> int:
    """The cursor of the thread's newest stored event (``0`` when it has none)."""
    model = swappable.event_model()
    return int(model.objects.filter(thread_id=thread_id).aggregate(top=Max("pk"))["top"] or 0)


def stored_between(thread_id: int, result_id: int, after: int, through: int) -> list[dict[str, Any]]:
    """The stored events of run ``result_id`` on the thread with cursors in ``(after, through]``, oldest first."""
    rows = swappable.event_model().objects.filter(
        thread_id=thread_id, result_id=result_id, pk__gt=after, pk__lte=through).order_by("pk")
    return [{**row.to_dict(), "cursor": row.pk} for row in rows]


def queue_run(thread_id: int, user: _AnyUser | None, session: SessionBase | None, text: str) -> dict[str, Any] | None:
    """Queue a run on the thread; ``None`` when the socket's session no longer may see the thread."""
    from robotlab_django.accounting.rate_limits import RateLimitedError
    from robotlab_django.registry import UnknownRobotError
    from robotlab_django.runs import busy

    thread, owner = still_allowed(thread_id, user, session)  # the session as stored now
    if thread is None:
        return None
    if not owner:
        return {"type": "error", "error": "Only the thread's owner may send messages."}
    try:  # under the robot's on_busy policy (robotlab_django.runs.busy); "reject" raises a ValueError
        started = busy.start_run(thread, thread.robot_name or default_robot(), text, user=user, limit_rate=True)
    except RateLimitedError as exc:
        return {"type": "error", "error": str(exc), "retry_after": exc.retry_after}
    except (ValueError, UnknownRobotError) as exc:
        return {"type": "error", "error": str(exc)}
    busy.dispatch(started)
    row = started.row
    return {"type": "queued", "result_id": row.pk, "run_id": row.run_id,
            "sequence_number": row.sequence_number, **started.fields()}


def text_problem(text: str) -> str:
    """Why the database cannot store ``text`` (a NUL character, an unpaired surrogate), or ``""``."""
    if "\x00" in text:
        return "The message contains a NUL character; remove it."
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "The message is not valid Unicode (an unpaired surrogate); remove the broken character."
    return ""


#: The reply frame of each frame that steers a run.
CONTROLLED = {"answer": "answered", "cancel": "cancelled", "approval": "decided"}


def control_run(thread_id: int, user: _AnyUser | None, session: SessionBase | None,
                content: dict[str, Any]) -> dict[str, Any] | None:
    """An ``answer``, ``cancel`` or ``approval`` frame: its reply frame (``answered``, ``cancelled``, ``decided``).

    The reply is ``{"type", "result_id", "status"}``, or an error frame; ``None`` when the socket's session no longer
    may see the thread (checked as stored now, as for a message). Only the owner answers and cancels; a tool call
    is decided by the owner, or by staff who may see the thread and hold ``robotlab.approve_toolcall``
    (:func:`robotlab_django.runs.approvals.may_approve`).
    """
    from robotlab_django.runs import control

    thread, owner = still_allowed(thread_id, user, session)
    if thread is None:
        return None
    kind = content["type"]
    if not owner and kind != "approval":
        return {"type": "error", "error": "Only the thread's owner may answer or cancel its runs."}
    result_id = content.get("result_id")
    row = thread.results.filter(pk=result_id).first() if isinstance(result_id, int) else None
    if row is None:
        return {"type": "error", "error": 'No run of this thread has that "result_id".'}
    try:
        if kind == "answer":
            row = control.answer(row, content["text"], user, check_owner=False)
        elif kind == "approval":
            request_id = content.get("request_id")
            row = control.decide(row, content.get("decision") == "approve", user, check_owner=not owner,
                                 request_id=request_id if isinstance(request_id, str) else None)
        else:
            row = control.cancel(row, user, check_owner=False)
    except control.RunControlError as exc:
        return {"type": "error", "error": str(exc)}
    return {"type": CONTROLLED[kind], "result_id": row.pk, "status": str(row.status)}
