"""Steering a run from outside: answer its robot's question, cancel it, expire an unanswered question.

A robot of a Django run asks its user through a :class:`robotlab.tools.parking.ParkingChannel`: the run
stops (:func:`robotlab_django.run_watch.park`: the row is ``awaiting`` with its ``question``, and no process
waits). The thread's owner answers with :func:`answer` (the chat page, a websocket frame, a POST, a protocol
server): the answer joins the row's ``answers``, ``hitl.resolved`` goes out, and the row is queued again for
any worker, which replays the steps done before the question (:mod:`robotlab_django.checkpoints`) and gives
the robot the answer. :func:`cancel` ends a queued, running or awaiting run (or network turn) as
``cancelled``: a running one notices within ``ROBOTLAB["CANCEL_POLL_INTERVAL"]``
(:func:`robotlab_django.run_watch.watch`). :func:`expire_parked` fails the runs parked longer than
``ROBOTLAB["ASK_TIMEOUT"]``.

How a running run notices a cancel, and how a run parks, is :mod:`robotlab_django.run_watch`'s.

The service functions raise :class:`RunControlError` subclasses a protocol layer maps to its errors:
:class:`NotOwnerError` (answer 404: the run is not the caller's), :class:`NotAwaitingError` and
:class:`RunFinishedError` (a clear no-op).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from robotlab.errors import RobotLabError
from robotlab.streaming import HITL_RESOLVED, RUN_CANCELLED, RUN_FAILED, STREAM_ENDED
from robotlab.tools.ask import resolve_answer

from . import run_watch, swappable
from .abstract_models import Status
from .conf import app_settings
from .event_stream import publish_events

__all__ = ["CANCELLABLE", "NotAwaitingError", "NotOwnerError", "RunControlError", "RunFinishedError", "answer",
           "cancel", "expire_parked", "is_owner"]

#: The statuses a cancel applies to.
CANCELLABLE = (Status.QUEUED, Status.RUNNING, Status.RETRYING, Status.AWAITING)


class RunControlError(RobotLabError, ValueError):
    """A request to answer or cancel a run that cannot apply; ``row`` is the run."""

    def __init__(self, row: Any, message: str) -> None:
        self.row = row
        super().__init__(message)


class NotOwnerError(RunControlError):
    """The run is not on a thread of the caller (treat it as not found: answer 404)."""


class NotAwaitingError(RunControlError):
    """The run is not waiting for an answer (it never asked, or was answered already)."""


class RunFinishedError(RunControlError):
    """The run is finished (completed, failed, skipped or cancelled): there is nothing to cancel."""


def is_owner(row: Any, user: Any, *, staff: bool = False) -> bool:
    """Whether ``user`` owns ``row``'s thread (``staff=True``: or is staff)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if staff and getattr(user, "is_staff", False):
        return True
    owner = swappable.thread_model().objects.filter(pk=row.thread_id).values_list("user_id", flat=True).first()
    return owner is not None and owner == user.pk


def _fresh(row: Any) -> Any:
    return type(row).objects.get(pk=row.pk)


def answer(row: Any, text: str, user: Any = None, *, check_owner: bool = True) -> Any:
    """Answer the question ``row`` waits on and queue it to resume on any worker.

    Args:
        row: The awaiting run (a robot run, a network task, or a network turn whose task asked).
        text: The answer (``"2"`` picks the second choice, ``""`` the default).
        user: Who answers; must own the thread unless ``check_owner`` is false.
        check_owner: Check ``user`` (a trusted caller, such as a test or a command, passes ``False``).

    Returns:
        The run row (``queued``; a turn's is ``running`` and its task row queued).

    Raises:
        TypeError: ``text`` is not a ``str``.
        NotOwnerError: ``user`` does not own the thread.
        NotAwaitingError: the run waits on no question.
    """
    from .executor import dispatch

    if not isinstance(text, str):
        raise TypeError(f"answer must be str, got {type(text).__name__}")
    if check_owner and not is_owner(row, user):
        raise NotOwnerError(row, f"Run {row.pk} is not on a thread of yours.")
    row = _fresh(row)
    target = row
    if row.status == Status.AWAITING and row.parent_id is None:
        child = type(row).objects.filter(parent_id=row.pk, status=Status.AWAITING).order_by("pk").first()
        target = child or row
    if target.status != Status.AWAITING or not target.question:
        raise NotAwaitingError(row, f"Run {row.pk} is {row.status}, not awaiting an answer; nothing to answer.")
    question = dict(target.question)
    resolved = resolve_answer(text, question.get("choices"), question.get("default"))
    answers = [*(target.answers or []), {"request_id": question.get("request_id"),
                                         "question": question.get("question"), "answer": text}]
    now = timezone.now()
    with transaction.atomic():
        if not type(row).objects.filter(pk=target.pk, status=Status.AWAITING).update(
                status=Status.QUEUED, question={}, answers=answers, attempts=0, updated_at=now):
            raise NotAwaitingError(row, f"Run {row.pk} was answered or cancelled meanwhile.")
        if target.pk != row.pk:
            type(row).objects.filter(pk=row.pk, status=Status.AWAITING).update(status=Status.RUNNING, question={},
                                                                             updated_at=now)
    publish_events(target, [(HITL_RESOLVED, {"request_id": question.get("request_id"), "answer": resolved,
                                             "status": "answered"})])
    dispatch(target.pk)  # after the commit: the "sync" executor runs it here and now
    return _fresh(row)


def cancel(row: Any, user: Any = None, *, staff: bool = False, check_owner: bool = True) -> Any:
    """Cancel a queued, running or awaiting run (or network turn, with its unfinished tasks).

    A queued or awaiting run ends now (``run.cancelled`` goes out here); a running one stops at its
    next check (:func:`robotlab_django.run_watch.watch`), keeps what it produced so far and sends
    ``run.cancelled`` itself.

    Args:
        row: The run.
        user: Who cancels; must own the thread (or be staff with ``staff=True``).
        staff: Let staff cancel any run (the admin action).
        check_owner: Check ``user`` at all.

    Returns:
        The row, ``cancelled``.

    Raises:
        NotOwnerError: ``user`` may not cancel it.
        RunFinishedError: it already finished.
    """
    if check_owner and not is_owner(row, user, staff=staff):
        raise NotOwnerError(row, f"Run {row.pk} is not on a thread of yours.")
    row = _fresh(row)
    previous = row.status
    now = timezone.now()
    fields = {"status": Status.CANCELLED, "error": "", "error_type": "", "finished_at": now, "updated_at": now}
    with transaction.atomic():
        # a running run keeps, from this moment, the reply it streamed so far (its runner, when it stops,
        # stores what it produced up to then); children keep their own columns
        own = {**fields, "reply": run_watch.streamed_reply(row)} if previous == Status.RUNNING else fields
        if previous not in CANCELLABLE or not type(row).objects.filter(pk=row.pk, status=previous).update(**own):
            raise RunFinishedError(row, f"Run {row.pk} is {_fresh(row).status}: it finished, nothing to cancel.")
        idle = list(type(row).objects.filter(parent_id=row.pk, status__in=[Status.QUEUED, Status.RETRYING,
                                                                           Status.AWAITING]))
        running = list(type(row).objects.filter(parent_id=row.pk, status=Status.RUNNING).values_list("pk", flat=True))
        type(row).objects.filter(parent_id=row.pk, status__in=CANCELLABLE).update(**fields)
    # a watch in this process reads the row at once (after the commit, so it sees the cancel)
    transaction.on_commit(lambda: run_watch.wake(row.pk, *running))
    if previous != Status.RUNNING or _turn_of_tasks(row):  # else its runner sends it when it stops
        publish_events(row, [(RUN_CANCELLED, {"robot": row.robot_name}), (STREAM_ENDED, {})])
    for task in idle:
        publish_events(task, [(RUN_CANCELLED, {"robot": task.robot_name}), (STREAM_ENDED, {})])
    return _fresh(row)


def _turn_of_tasks(row: Any) -> bool:
    """Whether ``row`` is a distributed network turn: no runner of its own sends its ``run.cancelled``."""
    from .network_turns import is_distributed

    return row.parent_id is None and is_distributed(row)


def expire_parked(*, timeout: float | None = None) -> list[Any]:
    """Fail the runs ``awaiting`` longer than ``timeout`` seconds (``ROBOTLAB["ASK_TIMEOUT"]``).

    Returns:
        The primary keys failed.
    """
    seconds = float(app_settings.ASK_TIMEOUT if timeout is None else timeout)
    cutoff = timezone.now() - timedelta(seconds=seconds)
    model = swappable.result_model()
    failed = []
    for row in model.objects.filter(status=Status.AWAITING, parked_at__lt=cutoff).order_by("pk"):
        asked = (row.question or {}).get("question", "")
        error = (f"No answer to {asked!r} within ROBOTLAB['ASK_TIMEOUT'] ({seconds:g} s); the run waited since "
                 f"{row.parked_at:%Y-%m-%d %H:%M:%S} UTC. Raise ASK_TIMEOUT to wait longer.")
        now = timezone.now()
        if model.objects.filter(pk=row.pk, status=Status.AWAITING).update(
                status=Status.FAILED, error=error, error_type="AskTimeout", finished_at=now, updated_at=now):
            failed.append(row.pk)
            publish_events(row, [(RUN_FAILED, {"robot": row.robot_name, "error": error, "error_type": "AskTimeout"}),
                                 (STREAM_ENDED, {})])
            if row.parent_id is not None:
                model.objects.filter(pk=row.parent_id, status=Status.AWAITING).update(
                    status=Status.FAILED, error=error, error_type="AskTimeout", finished_at=now, updated_at=now)
    return failed


