"""Steering a run from outside: answer its robot's question, approve or deny its tool call, cancel it, expire.

A robot of a Django run asks its user through a :class:`robotlab.tools.parking.ParkingChannel`: the run
stops (:func:`robotlab_django.runs.watch.park`: the row is ``awaiting`` with its ``question``, and no process
waits). The thread's owner answers with :func:`answer` (the chat page, a websocket frame, a POST, a protocol
server): the answer joins the row's ``answers``, ``hitl.resolved`` goes out, and the row is queued again for
any worker, which replays the steps done before the question (:mod:`robotlab_django.runs.checkpoints`) and gives
the robot the answer. A run parked on a tool call waiting for approval (:mod:`robotlab_django.runs.approvals`) is
answered the same way with ``approve`` or ``deny`` (:func:`decide`), by its user or by staff with the
``robotlab.approve_toolcall`` permission; a denied call does not run and the model reads ``"denied by <user>"``.
:func:`cancel` ends a queued, running or awaiting run (or network turn) as
``cancelled``: a running one notices within ``ROBOTLAB["CANCEL_POLL_INTERVAL"]``
(:func:`robotlab_django.runs.watch.watch`). :func:`expire_parked` fails the runs parked longer than
``ROBOTLAB["ASK_TIMEOUT"]``.

How a running run notices a cancel, and how a run parks, is :mod:`robotlab_django.runs.watch`'s.

The service functions raise :class:`RunControlError` subclasses a protocol layer maps to its errors:
:class:`NotOwnerError` (answer 404: the run is not the caller's), :class:`NotAwaitingError` and
:class:`RunFinishedError` (a clear no-op), :class:`BadAnswerError` (an approval answered with neither ``approve`` nor
``deny``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from robotlab.errors import RobotLabError
from robotlab.streaming import HITL_RESOLVED, RUN_FAILED, STREAM_ENDED
from robotlab.tools.ask import resolve_answer
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.conf import app_settings
from robotlab_django.runs import approvals
from robotlab_django.runs import watch as run_watch
from robotlab_django.runs.user_errors import public_run_id as _public
from robotlab_django.streaming.event_stream import publish_events

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab_django.models import RobotResult

__all__ = ["CANCELLABLE", "BadAnswerError", "NotAwaitingError", "NotOwnerError", "RunControlError",
           "RunFinishedError", "answer", "cancel", "decide", "expire_parked", "is_owner"]

#: The statuses a cancel applies to.
CANCELLABLE = (Status.QUEUED, Status.RUNNING, Status.RETRYING, Status.AWAITING)


class RunControlError(RobotLabError, ValueError):
    """A request to answer or cancel a run that cannot apply; ``row`` is the run."""

    def __init__(self, row: RobotResult, message: str) -> None:
        self.row = row
        super().__init__(message)


class NotOwnerError(RunControlError):
    """The run is not on a thread of the caller (treat it as not found: answer 404)."""


class NotAwaitingError(RunControlError):
    """The run is not waiting for an answer (it never asked, or was answered already)."""


class RunFinishedError(RunControlError):
    """The run is finished (completed, failed, skipped or cancelled): there is nothing to cancel."""


class BadAnswerError(RunControlError):
    """The answer does not fit what the run waits on: a tool call's approval takes ``approve`` or ``deny``."""


def is_owner(row: RobotResult, user: _AnyUser | None, *, staff: bool = False) -> bool:
    """Whether ``user`` owns ``row``'s thread (``staff=True``: or is staff)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    if staff and getattr(user, "is_staff", False):
        return True
    owner = swappable.thread_model().objects.filter(pk=row.thread_id).values_list("user_id", flat=True).first()
    return owner is not None and owner == user.pk


def _fresh(row: RobotResult) -> RobotResult:
    return type(row).objects.get(pk=row.pk)


def _target(row: RobotResult) -> RobotResult:
    """The row that waits: ``row``, or the awaiting task row of the network turn ``row``."""
    if row.status == Status.AWAITING and row.parent_id is None:
        child = type(row).objects.filter(parent_id=row.pk, status=Status.AWAITING).order_by("pk").first()
        return child or row
    return row


def _decider(user: _AnyUser | None) -> str:
    """Who decided, as the model reads it: the user's name (``"the user"`` for an anonymous visitor)."""
    name = user.get_username() if user is not None and getattr(user, "is_authenticated", False) else ""
    return str(name or "the user")


def answer(row: RobotResult, text: str, user: _AnyUser | None = None, *, check_owner: bool = True) -> RobotResult:
    """Answer the question ``row`` waits on and queue it to resume on any worker.

    A run waiting for a tool call's approval takes ``approve`` or ``deny`` (``1`` and ``2``, ``yes`` and ``no``
    too), from its user or from staff with the ``robotlab.approve_toolcall`` permission
    (:func:`robotlab_django.runs.approvals.may_approve`); the decision names ``user``.

    Args:
        row: The awaiting run (a robot run, a network task, or a network turn whose task asked).
        text: The answer (``"2"`` picks the second choice, ``""`` the default).
        user: Who answers; must own the thread (or may approve, for an approval) unless ``check_owner`` is false.
        check_owner: Check ``user`` (a trusted caller, such as a test, a command or a page that checked the
            thread's owner itself, passes ``False``).

    Returns:
        The run row (``queued``; a turn's is ``running`` and its task row queued).

    Raises:
        TypeError: ``text`` is not a ``str``.
        NotOwnerError: ``user`` may not answer.
        NotAwaitingError: the run waits on no question.
        BadAnswerError: an approval answered with neither ``approve`` nor ``deny``.
    """
    return _answer(row, text, user, check_owner=check_owner)


def decide(row: RobotResult, approved: bool, user: _AnyUser | None = None, *, request_id: str | None = None,
           check_owner: bool = True) -> RobotResult:
    """Approve (``approved=True``) or deny the tool call ``row`` waits on, as ``user``, and resume the run.

    Args:
        row: The run (or network turn) parked on the approval.
        approved: Run the call (``True``), or deny it: the model reads ``"denied by <user name>"``.
        user: Who decides: the run's user, or active staff with the ``robotlab.approve_toolcall`` permission
            (:func:`robotlab_django.runs.approvals.may_approve`), unless ``check_owner`` is false.
        request_id: The approval decided (its ``request_id``, as the page showed it): another one is refused.
        check_owner: Check ``user``.

    Raises:
        NotOwnerError: ``user`` may not decide.
        NotAwaitingError: the run waits on no approval, or on another one than ``request_id``.
    """
    return _answer(row, "approve" if approved else "deny", user, check_owner=check_owner, approval=True,
                   request_id=request_id)


def _answer(row: RobotResult, text: str, user: _AnyUser | None, *, check_owner: bool, approval: bool = False,
            request_id: str | None = None) -> RobotResult:
    from robotlab_django.runs.executor import dispatch

    if not isinstance(text, str):
        raise TypeError(f"answer must be str, got {type(text).__name__}")
    owner = not check_owner or is_owner(row, user)
    row = _fresh(row)
    target = _target(row)
    question = dict(target.question or {})
    deciding = approvals.is_approval(question)
    if not owner and not (deciding and target.status == Status.AWAITING and approvals.may_approve(target, user)):
        raise NotOwnerError(row, f"Run {_public(row)} is not on a thread of yours.")
    if target.status != Status.AWAITING or not question:
        raise NotAwaitingError(row, f"Run {_public(row)} is {row.status}, not awaiting an answer; nothing to answer.")
    if approval and not deciding:
        raise NotAwaitingError(row, f"Run {_public(row)} waits on a question, not on a tool call to approve.")
    if request_id is not None and question.get("request_id") != request_id:
        raise NotAwaitingError(row, f"That tool call of run {_public(row)} was decided already.")
    if deciding:
        approved = approvals.decision_of(text)
        if approved is None:
            raise BadAnswerError(row, f"Run {_public(row)} waits for approval of {question.get('tool')}: answer "
                                      f"'approve' or 'deny', not {text!r}.")
        entry = approvals.decision(question, approved, _decider(user))
        resolved = {"answer": entry["answer"], "by": entry["by"]}
    else:
        entry = {"request_id": question.get("request_id"), "question": question.get("question"), "answer": text}
        resolved = {"answer": resolve_answer(text, question.get("choices"), question.get("default"))}
    answers = [*(target.answers or []), entry]
    now = timezone.now()
    with transaction.atomic():
        if not type(row).objects.filter(pk=target.pk, status=Status.AWAITING).update(
                status=Status.QUEUED, question={}, answers=answers, attempts=0, updated_at=now):
            raise NotAwaitingError(row, f"Run {_public(row)} was answered or cancelled meanwhile.")
        if target.pk != row.pk:
            type(row).objects.filter(pk=row.pk, status=Status.AWAITING).update(status=Status.RUNNING, question={},
                                                                             updated_at=now)
    publish_events(target, [(HITL_RESOLVED, {"request_id": question.get("request_id"), **resolved,
                                             "status": "answered"})])
    dispatch(target.pk)  # after the commit: the "sync" executor runs it here and now
    return _fresh(row)


def cancel(row: RobotResult, user: _AnyUser | None = None, *, staff: bool = False,
           check_owner: bool = True) -> RobotResult:
    """Cancel a queued, running or awaiting run (or network turn, with its unfinished tasks).

    Cancelling an unfinished task row of a distributed network turn cancels its turn, with all its tasks.

    A queued or awaiting run ends now (``run.cancelled`` goes out here); a running one stops at its
    next check (:func:`robotlab_django.runs.watch.watch`), keeps what it produced so far and sends
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
        raise NotOwnerError(row, f"Run {_public(row)} is not on a thread of yours.")
    row = _fresh(row)
    if row.parent_id is not None and row.status in CANCELLABLE and _cancel_turn(row):
        return _fresh(row)
    previous = row.status
    now = timezone.now()
    fields = {"status": Status.CANCELLED, "error": "", "error_type": "", "error_kind": "", "finished_at": now,
              "updated_at": now}
    with transaction.atomic():
        # a running run keeps, from this moment, the reply it streamed so far (its runner, when it stops,
        # stores what it produced up to then); children keep their own columns
        own = {**fields, "reply": run_watch.streamed_reply(row)} if previous == Status.RUNNING else fields
        if previous not in CANCELLABLE or not type(row).objects.filter(pk=row.pk, status=previous).update(**own):
            raise RunFinishedError(row, f"Run {_public(row)} is {_fresh(row).status}: it finished, nothing to cancel.")
        idle = list(type(row).objects.filter(parent_id=row.pk, status__in=[Status.QUEUED, Status.RETRYING,
                                                                           Status.AWAITING]))
        running = list(type(row).objects.filter(parent_id=row.pk, status=Status.RUNNING).values_list("pk", flat=True))
        type(row).objects.filter(parent_id=row.pk, status__in=CANCELLABLE).update(**fields)
    # a watch in this process reads the row at once (after the commit, so it sees the cancel)
    transaction.on_commit(lambda: run_watch.wake(row.pk, *running))
    # a running run's runner sends it when it stops; so does the last running task of a distributed turn
    if previous != Status.RUNNING or (_turn_of_tasks(row) and not running):
        publish_events(row, run_watch.cancelled_events(_fresh(row)))
    for task in idle:
        publish_events(task, run_watch.cancelled_events(task))
    if running and _turn_of_tasks(row):  # its running tasks may have stopped already
        run_watch.turn_stopped(row.pk)
    if previous != Status.RUNNING and row.parent_id is None:  # no runner ends it: the reply behind it may run now
        from robotlab_django.runs.executor import release_next

        release_next(row.thread_id)
    return _fresh(row)


def _cancel_turn(task: RobotResult) -> bool:
    """Cancel the network turn of the unfinished task row ``task`` (and so the task); ``False`` when it had ended.

    One task of a distributed turn is not a run of its own: the turn waits on it, so cancelling the task
    alone would leave the turn unfinished until its attempts ran out.
    """
    turn = type(task).objects.filter(pk=task.parent_id).first() if task.parent_id is not None else None
    if turn is None:
        return False
    try:
        cancel(turn, check_owner=False)
    except RunFinishedError:  # the turn ended meanwhile: cancel the task row alone
        return False
    return True


def _turn_of_tasks(row: RobotResult) -> bool:
    """Whether ``row`` is a distributed network turn: no runner of its own sends its ``run.cancelled``."""
    from robotlab_django.networks.distributed import is_distributed

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


