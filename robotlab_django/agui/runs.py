"""What an AG-UI request does to the app's runs: start one, answer a parked one, find one to reconnect to, cancel.

A ``threadId`` is a thread of the caller: the ids a client chooses are scoped per user as the other protocol doors
scope theirs (:func:`~robotlab_django.protocols.runs.scoped_session_id`), and the id of a thread the app made (the
chat page's) names that thread when it is the caller's. An id that names a thread of someone else is refused
(:class:`RefusedThreadError`), never taken over; an id no thread has starts a new thread of the caller's.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.agui.inputs import InputError, RunInput, answer_text
from robotlab_django.agui.positions import Position
from robotlab_django.agui.stream import check_position
from robotlab_django.protocols import runs as protocol_runs
from robotlab_django.runs.control import CANCELLABLE, RunFinishedError, cancel

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

    from robotlab_django.models import RobotResult, Thread

__all__ = ["RefusedThreadError", "answer_interrupt", "cancel_runs", "owned_thread", "reconnect_row", "start_run"]


class RefusedThreadError(Exception):
    """The ``threadId`` names a thread of another user (or an ownerless one)."""


def owned_thread(user: _User, thread_id: str) -> Thread | None:
    """``user``'s thread ``thread_id``; ``None`` when no thread has that id.

    Raises:
        RefusedThreadError: the id names a thread ``user`` does not own.
    """
    found = protocol_runs.find_thread(thread_id, user)
    if found is not None:
        return found
    others = swappable.thread_model().objects.filter(session_id__in=protocol_runs.session_keys(thread_id, user))
    if others.exists():
        raise RefusedThreadError(f"threadId {thread_id!r} is not a thread of yours; use another id (an unknown one "
                                 "starts a new thread).")
    return None


def start_run(user: _User, agent: str, run_input: RunInput) -> RobotResult:
    """Queue a run of ``agent`` for the input's new message on ``user``'s thread (created when new); the row.

    Raises:
        RefusedThreadError: the thread is another user's.
        ValueError, RateLimitedError, AttachmentsTooLargeError: as
            :func:`~robotlab_django.protocols.runs.start_for_user` raises them.
    """
    owned_thread(user, run_input.thread_id)
    try:
        return protocol_runs.start_for_user(user, agent, run_input.text, run_input.thread_id,
                                            attachments=run_input.attachments or None)
    except protocol_runs.SessionTakenError:
        raise RefusedThreadError(f"threadId {run_input.thread_id!r} is not a thread of yours.") from None


def _parked(user: _User, agent: str, run_input: RunInput) -> Any:
    """The caller's run of ``agent`` on the thread that waits on the interrupt the input's one resume entry answers."""
    if len(run_input.resume) != 1:
        raise InputError(f"'resume' answers the one interrupt a run here ends with, got {len(run_input.resume)} "
                         "entries.")
    entry = run_input.resume[0]
    thread = owned_thread(user, run_input.thread_id)
    rows = [] if thread is None else swappable.result_model().objects.filter(
        thread=thread, parent__isnull=True, robot_name=agent, status=Status.AWAITING)
    for row in rows:
        if str((row.question or {}).get("request_id") or "") == entry.interrupt_id:
            return row
    raise LookupError(f"No run of {agent!r} on thread {run_input.thread_id!r} waits on interrupt "
                      f"{entry.interrupt_id!r}: it was answered or cancelled already, or never asked.")


async def answer_interrupt(user: _User, agent: str, run_input: RunInput) -> tuple[Any, int]:
    """Answer (or, with status ``cancelled``, cancel) the parked run the input's resume entry names.

    Returns the run and the last event stored before the answer (its stream goes on after it).

    Raises:
        InputError: not one resume entry, or a payload the question does not take.
        LookupError: no run of the caller's waits on that interrupt.
        RunControlError: it was answered or cancelled meanwhile.
    """
    row = await sync_to_async(_parked)(user, agent, run_input)
    entry = run_input.resume[0]
    after = await protocol_runs.last_event_pk(row)
    if entry.status == "cancelled":
        return await protocol_runs.acancel(row, user), after
    return await protocol_runs.aanswer(row, answer_text(entry, dict(row.question or {})), user), after


def reconnect_row(user: _User, agent: str, thread_id: str, position: Position) -> Any:
    """The run a ``Last-Event-ID`` names, when it is the caller's run of ``agent`` on the thread ``thread_id``.

    Raises:
        LookupError: it is no such run.
        PositionError: the id names rows of another run.
    """
    row = protocol_runs.find_run(position.run_id, user)
    thread = owned_thread(user, thread_id) if row is not None else None
    if row is None or row.parent_id is not None or row.robot_name != agent or thread is None \
            or thread.pk != row.thread_id:
        raise LookupError(f"Last-Event-ID names no run of {agent!r} on thread {thread_id!r} of yours.")
    check_position(row, position)
    return row


def _stored_run_id(value: str) -> str:
    """The stored run id (32 hex characters) of a run id given as a UUID, or ``value`` as it is."""
    try:
        return uuid.UUID(value).hex
    except ValueError:
        return value


def cancel_runs(user: _User, agent: str, thread_id: str, run_id: str | None) -> list[Any]:
    """Cancel the unfinished runs of ``agent`` on ``user``'s thread (only ``run_id``, a stored run id, when given).

    Returns the rows cancelled.

    Raises:
        LookupError: no such thread, or no such run on it.
        RunFinishedError: ``run_id`` finished already.
    """
    thread = owned_thread(user, thread_id)
    if thread is None:
        raise LookupError(f"No thread {thread_id!r} of yours.")
    rows = swappable.result_model().objects.filter(thread=thread, parent__isnull=True, robot_name=agent)
    if run_id is not None:
        row = rows.filter(run_id=_stored_run_id(run_id)).first()
        if row is None:
            raise LookupError(f"No run {run_id!r} of {agent!r} on thread {thread_id!r}.")
        return [cancel(row, user)]
    cancelled = []
    for row in rows.filter(status__in=CANCELLABLE).order_by("sequence_number"):
        try:
            cancelled.append(cancel(row, user))
        except RunFinishedError:  # it finished meanwhile
            continue
    return cancelled
