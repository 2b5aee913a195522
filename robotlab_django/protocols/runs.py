"""The run service the protocol servers (ACP, A2A, AG-UI) share.

Start a run for a token's user on a thread, look a run or thread up for its owner only, wait for a run to settle,
follow its stored events.

Waiting and following read the database (the row's status, its :class:`RunEvent` rows), so they work
whichever process or Celery worker executes the run; they check every :data:`POLL_INTERVAL` seconds.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.models import Q

from robotlab.streaming import STREAM_ENDED
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.runs import busy
from robotlab_django.runs import control as run_control

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

    from robotlab_django.models import RobotResult, Thread

__all__ = ["MAX_SESSION_ID_LENGTH", "POLL_INTERVAL", "SETTLED", "SETTLED_GRACE", "SessionTakenError", "aanswer",
           "acancel", "afollow_events", "await_settled", "check_session_id", "find_run", "find_thread", "last_event_pk",
           "public_session_id", "scoped_session_id", "session_keys", "start_for_user"]

#: Seconds between two reads of a run's row or events while waiting on it.
POLL_INTERVAL = 0.05

#: Row statuses a synchronous protocol call returns on: finished, or waiting for an answer.
SETTLED: tuple[str, ...] = (str(Status.COMPLETED), str(Status.FAILED), str(Status.SKIPPED), str(Status.CANCELLED),
                            str(Status.AWAITING))


def scoped_session_id(session_id: str, user: _User) -> str:
    """The stored session id of ``user``'s session ``session_id``: ``"user-<pk>:<session_id>"``.

    Session (context) ids a client chooses are scoped per user: another user's id is a new session of one's own, so
    an id tells nothing about other users' sessions and cannot be taken from them.
    """
    return f"user-{user.pk}:{session_id}"


def public_session_id(thread: Thread) -> str:
    """The session id a protocol client knows ``thread`` by: its session id without its owner's scope."""
    scope = f"user-{thread.user_id}:"
    session_id = str(thread.session_id)
    return session_id[len(scope):] if thread.user_id is not None and session_id.startswith(scope) else session_id


def session_keys(session_id: str, user: _User) -> list[str]:
    """The stored session ids ``user``'s session ``session_id`` may have: scoped, or as it is.

    A thread made by the app (the chat page, a run without a session id) keeps its own id (a UUID), and so does a
    session stored before ids were scoped.
    """
    return [scoped_session_id(session_id, user), session_id]


def find_thread(session_id: str, user: _User) -> Thread | None:
    """``user``'s thread with the session id ``session_id`` (see :func:`session_keys`); ``None`` if none."""
    keys = session_keys(session_id, user)
    found = {thread.session_id: thread for thread in swappable.thread_model().objects.filter(
        session_id__in=keys, user=user)}
    return next((found[key] for key in keys if key in found), None)


def find_run(run_id: str, user: _User) -> RobotResult | None:
    """The run row with ``run_id`` on a thread of ``user``; ``None`` if missing or someone else's."""
    return (swappable.result_model().objects.select_related("thread")
            .filter(run_id=run_id, thread__user=user).first())


#: The longest session (context) id a protocol client may choose.
MAX_SESSION_ID_LENGTH = 200

_SESSION_ID = re.compile(r"[^\s\x00-\x1f\x7f]+")


def check_session_id(session_id: str) -> str:
    """``session_id`` if a client may name a session (thread) with it.

    It has 1 to :data:`MAX_SESSION_ID_LENGTH` characters, none of them a space or a control character.

    Raises:
        ValueError: it is not such an id.
    """
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise ValueError("A session (context) id is a string without spaces or control characters.")
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        raise ValueError(f"A session (context) id has at most {MAX_SESSION_ID_LENGTH} characters, got "
                         f"{len(session_id)}.")
    return session_id


class SessionTakenError(LookupError):
    """The stored session id of a new session names a thread of another user (one not made by a protocol)."""


def _own_thread(session_id: str, user: _User) -> Thread:
    """``user``'s thread for the session ``session_id``, created (scoped to the user) when new."""
    thread = find_thread(session_id, user)
    if thread is not None:
        return thread
    created, _ = swappable.thread_model().objects.get_or_create(session_id=scoped_session_id(session_id, user),
                                                                defaults={"user": user})
    if created.user_id != user.pk:
        raise SessionTakenError(session_id)
    return created


def start_for_user(user: _User, agent: str, text: str, session_id: str | None, *, attachments: object = None,
                   on_stored: Callable[[RobotResult], object] | None = None) -> RobotResult:
    """Queue a run of ``agent`` for ``text`` on ``user``'s thread ``session_id`` (created if new).

    Session ids are per user (:func:`scoped_session_id`): one that another user also uses names a session of
    ``user``'s own. ``attachments`` (files sent with the message) are stored with the row, so the worker that runs
    it sends them to the model. ``on_stored(row)`` is called in the transaction that stores the row, before it is
    dispatched to the configured executor under the agent's on-busy policy (:mod:`robotlab_django.runs.busy`), so
    what it stores (an A2A webhook) sees the whole run; returns the row. Nothing is written when the input is
    refused.

    Raises:
        SessionTakenError: the scoped session id is a thread of another user that no protocol made.
        UnknownRobotError: no robot or network ``agent``.
        ValueError: the message is empty or too long, the session id malformed (:func:`check_session_id`), or an
            attachment is bad or they are too large (:class:`~robotlab_django.runs.records.AttachmentsTooLargeError`).
        RateLimitedError: the user queued too many runs lately (:mod:`robotlab_django.accounting.rate_limits`).
        ReplyRunningError: the agent's on-busy policy is ``"reject"`` and a reply of the session runs (a
            ``ValueError``).
    """
    if not text.strip() and not attachments:
        raise ValueError("The message is empty: send some text or a file.")
    thread: Thread | None = None
    with transaction.atomic():  # a thread made for a run that is refused is not kept
        if session_id is not None:
            thread = _own_thread(check_session_id(session_id), user)
        started = busy.start_run(thread, agent, text, user=user, attachments=attachments, limit_rate=True)
        if on_stored is not None:
            on_stored(started.row)
    busy.dispatch(started)
    return started.row


async def await_settled(row: RobotResult, statuses: tuple[str, ...] = SETTLED) -> RobotResult:
    """Re-read ``row`` until its status is one of ``statuses``; returns the fresh row."""
    model = type(row)
    while True:
        fresh: RobotResult = await model.objects.select_related("thread").aget(pk=row.pk)
        if fresh.status in statuses:
            return fresh
        await asyncio.sleep(POLL_INTERVAL)


#: Seconds a settled run may go without its ``stream.ended`` event before following it stops anyway.
SETTLED_GRACE = 5.0


def _rows_of(row: RobotResult) -> Q:
    """``row``'s events and those of its task rows (a distributed network turn stores its tasks' there)."""
    return Q(result_id=row.pk) | Q(result__parent_id=row.pk)


async def last_event_pk(row: RobotResult) -> int:
    """The primary key of the newest stored event of ``row`` or its task rows (0 without any).

    Follow a resumed run from there.
    """
    event_model = swappable.event_model()
    last = await event_model.objects.filter(_rows_of(row)).order_by("-pk").values_list("pk", flat=True).afirst()
    return int(last or 0)


def _after(row: RobotResult, seen: Mapping[int, int], after: int) -> Q:
    """The events not followed yet: after the last one seen of each row, and every one of a row not seen yet.

    Each row's events are stored in order by the one process that runs it, but the tasks of a distributed turn
    run side by side: one may commit an event numbered below another's already seen.
    """
    known = Q(result_id=row.pk, pk__gt=seen.get(row.pk, after))
    for pk, last in seen.items():
        if pk != row.pk:
            known |= Q(result_id=pk, pk__gt=last)
    return known | (Q(result__parent_id=row.pk, pk__gt=after) & ~Q(result_id__in=list(seen)))


async def afollow_events(row: RobotResult, *, after: int = 0,
                         seen: Mapping[int, int] | None = None) -> AsyncIterator[dict[str, Any]]:
    """The stored events of ``row`` and of its task rows as they arrive, through ``row``'s ``stream.ended``.

    Each is ``{"kind", ...data}`` with ``cursor`` (its primary key) and ``result_id`` (its row). A distributed
    network turn stores each task's events (its text deltas, tagged ``task``) on the task's own row, so those
    are followed too, each row in its own order; only the followed row's ``stream.ended`` ends it.

    A run's status may settle before its last events are stored (a cancel is written at once, while its
    worker stores the text it streamed until it notices), so following ends at the run's ``stream.ended``
    event, not at its status; a settled run that sends none for :data:`SETTLED_GRACE` seconds ends it too.
    A parked run (``awaiting``) sends no ``stream.ended`` (it goes on once answered) and has stored every
    event before it parked: following ends as soon as no more are stored.

    Args:
        row: The run.
        after: Only events stored after the one with this primary key (:func:`last_event_pk`).
        seen: The last event already followed of each row (the run's and its task rows'): only events after it, for
            those rows (a reconnect goes on from there; a row not named starts after ``after``).
    """
    event_model = swappable.event_model()
    loop = asyncio.get_running_loop()
    seen = dict(seen or {})
    settled_at = None
    while True:
        fresh = await type(row).objects.aget(pk=row.pk)
        events = [event async for event in event_model.objects.filter(_rows_of(row) & _after(row, seen, after))
                  .order_by("pk")]
        for event in events:
            if event.result_id is not None:  # always: the events of these rows
                seen[event.result_id] = event.pk
            yield {**event.to_dict(), "cursor": event.pk, "result_id": event.result_id}
            if event.kind == STREAM_ENDED and event.result_id == row.pk:
                return
        if fresh.status == Status.AWAITING and not events:
            return
        if fresh.status in SETTLED and not events:
            settled_at = settled_at if settled_at is not None else loop.time()
            if loop.time() - settled_at > SETTLED_GRACE:
                return
        if not events:
            await asyncio.sleep(POLL_INTERVAL)


async def aanswer(row: RobotResult, text: str, user: _User) -> RobotResult:
    """Answer ``row``'s pending question as ``user`` (see :func:`run_control.answer`)."""
    return await sync_to_async(run_control.answer)(row, text, user)


async def acancel(row: RobotResult, user: _User) -> RobotResult:
    """Cancel ``row`` as ``user`` (see :func:`run_control.cancel`)."""
    return await sync_to_async(run_control.cancel)(row, user)
