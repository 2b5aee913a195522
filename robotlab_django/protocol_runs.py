"""The run service the protocol servers (ACP, A2A) share.

Start a run for a token's user on a thread, look a run or thread up for its owner only, wait for a run to settle,
follow its stored events.

Waiting and following read the database (the row's status, its :class:`RunEvent` rows), so they work
whichever process or Celery worker executes the run; they check every :data:`POLL_INTERVAL` seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async

from robotlab.streaming import STREAM_ENDED

from . import executor, run_control, swappable
from .abstract_models import Status
from .records import start_run

__all__ = ["POLL_INTERVAL", "SETTLED", "SETTLED_GRACE", "SessionTakenError", "aanswer", "acancel", "afollow_events",
           "await_settled", "find_run", "find_thread", "last_event_pk", "start_for_user"]

#: Seconds between two reads of a run's row or events while waiting on it.
POLL_INTERVAL = 0.05

#: Row statuses a synchronous protocol call returns on: finished, or waiting for an answer.
SETTLED: tuple[str, ...] = (str(Status.COMPLETED), str(Status.FAILED), str(Status.SKIPPED), str(Status.CANCELLED),
                            str(Status.AWAITING))


def find_thread(session_id: str, user: Any) -> Any:
    """The thread with ``session_id`` owned by ``user``; ``None`` if missing or someone else's."""
    return swappable.thread_model().objects.filter(session_id=session_id, user=user).first()


def find_run(run_id: str, user: Any) -> Any:
    """The run row with ``run_id`` on a thread of ``user``; ``None`` if missing or someone else's."""
    return (swappable.result_model().objects.select_related("thread")
            .filter(run_id=run_id, thread__user=user).first())


class SessionTakenError(LookupError):
    """The session id names a thread of another user."""


def start_for_user(user: Any, agent: str, text: str, session_id: str | None, *, attachments: Any = None) -> Any:
    """Queue a run of ``agent`` for ``text`` on ``user``'s thread ``session_id`` (created if new).

    ``attachments`` (files sent with the message) are stored with the row, so the worker that runs it sends
    them to the model. It is dispatched to the configured executor; returns the row.

    Raises:
        SessionTakenError: the session id belongs to another user's thread.
        UnknownRobotError: no robot or network ``agent``.
        ValueError: the message is too long, or an attachment is bad or they are too large
            (:class:`~robotlab_django.records.AttachmentsTooLargeError`).
    """
    thread: Any = None
    if session_id:
        thread = find_thread(session_id, user)
        if thread is None:
            if swappable.thread_model().objects.filter(session_id=session_id).exists():
                raise SessionTakenError(session_id)
            thread = session_id
    row = start_run(thread, agent, text, user=user, attachments=attachments)
    executor.dispatch(row)
    return row


async def await_settled(row: Any, statuses: tuple[str, ...] = SETTLED) -> Any:
    """Re-read ``row`` until its status is one of ``statuses``; returns the fresh row."""
    model = type(row)
    while True:
        fresh = await model.objects.select_related("thread").aget(pk=row.pk)
        if fresh.status in statuses:
            return fresh
        await asyncio.sleep(POLL_INTERVAL)


#: Seconds a settled run may go without its ``stream.ended`` event before following it stops anyway.
SETTLED_GRACE = 5.0


async def last_event_pk(row: Any) -> int:
    """The primary key of ``row``'s newest stored event (0 without any): follow a resumed run from there."""
    event_model = swappable.event_model()
    last = await event_model.objects.filter(result_id=row.pk).order_by("-pk").values_list("pk", flat=True).afirst()
    return int(last or 0)


async def afollow_events(row: Any, *, after: int = 0) -> AsyncIterator[dict[str, Any]]:
    """The stored events of ``row`` as they arrive (``{"kind", ...data}``), through its ``stream.ended``.

    A run's status may settle before its last events are stored (a cancel is written at once, while its
    worker stores the text it streamed until it notices), so following ends at the run's ``stream.ended``
    event, not at its status; a settled run that sends none for :data:`SETTLED_GRACE` seconds ends it too.
    A parked run (``awaiting``) sends no ``stream.ended`` (it goes on once answered) and has stored every
    event before it parked: following ends as soon as no more are stored.

    Args:
        row: The run.
        after: Only events stored after the one with this primary key (:func:`last_event_pk`).
    """
    event_model = swappable.event_model()
    loop = asyncio.get_running_loop()
    last, settled_at = after, None
    while True:
        fresh = await type(row).objects.aget(pk=row.pk)
        events = [event async for event in event_model.objects.filter(result_id=row.pk, pk__gt=last).order_by("pk")]
        for event in events:
            last = event.pk
            yield event.to_dict()
            if event.kind == STREAM_ENDED:
                return
        if fresh.status == Status.AWAITING and not events:
            return
        if fresh.status in SETTLED and not events:
            settled_at = settled_at if settled_at is not None else loop.time()
            if loop.time() - settled_at > SETTLED_GRACE:
                return
        if not events:
            await asyncio.sleep(POLL_INTERVAL)


async def aanswer(row: Any, text: str, user: Any) -> Any:
    """Answer ``row``'s pending question as ``user`` (see :func:`run_control.answer`)."""
    return await sync_to_async(run_control.answer)(row, text, user)


async def acancel(row: Any, user: Any) -> Any:
    """Cancel ``row`` as ``user`` (see :func:`run_control.cancel`)."""
    return await sync_to_async(run_control.cancel)(row, user)
