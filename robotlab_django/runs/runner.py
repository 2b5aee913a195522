"""Executing runs: one async path for robots and networks, with thin sync wrappers.

:func:`aexecute` is the leaf unit of work: given a claimed (``running``) result row, it prepares the
row's :class:`~robotlab_django.runs.runnables.Work` (a robot with the thread's history, or a network turn),
runs ``runnable.arun(message, run_id=row.run_id, on_event=...)`` through the event pump
(:func:`robotlab_django.streaming.event_stream.astream_run`: every event stored and sent to the thread's group),
and stores the outcome one way (:func:`robotlab_django.runs.records.store_outcome`), or the error. Each LLM
call and tool call of a robot run is checkpointed as it completes (:mod:`robotlab_django.runs.checkpoints`),
so an execution after a lost worker replays them.

:func:`aexecute_run` claims a queued row first (:func:`robotlab_django.runs.claims.claim`: a second worker
given the same row does nothing); :func:`arun_robot` queues the row too. Each has a sync twin that is a
thin wrapper (:func:`robotlab_django.runs.sync_bridge.call_sync`: the coroutine on RobotLab's loop, the
database work in the caller's thread). :func:`deliver` is what a background job does with a row it was
handed (a Celery task, a re-queue): admit it (:func:`robotlab_django.runs.claims.admit`), then execute it.

Once a run completed and its last events went out, :data:`run_completed` is sent (online evals listen:
:mod:`robotlab_django.evals.online`); a receiver's error is logged, never the run's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from django.dispatch import Signal

from robotlab.errors import RobotLabError
from robotlab.streaming import RUN_COMPLETED, Event, failure_data
from robotlab.tools.parking import RunParked
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.accounting import admission
from robotlab_django.networks import distributed as network_turns
from robotlab_django.runs import claims, thread_queue, watch
from robotlab_django.runs.records import current_worker, save_row, start_run, store_outcome
from robotlab_django.runs.runnables import Work, prepare
from robotlab_django.runs.sync_bridge import blocking, call_sync
from robotlab_django.streaming.event_stream import apublish_events, apublish_failure, astream_run, asweep
from robotlab_django.tracing.runs import traced

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab.llm import LLM
    from robotlab_django.models import RobotResult
    from robotlab_django.runs.records import ThreadRef

__all__ = ["ExecuteOptions", "RunFailedError", "aexecute", "aexecute_run", "arun_robot", "deliver", "execute",
           "execute_run", "run_completed", "run_robot"]

logger = logging.getLogger("robotlab_django")

EventCallback = Callable[[Event], Any]

#: Sent after a run completed, its row stored and its last events sent: ``sender`` is the result model, ``row`` the
#: row. Receivers run in the run's database thread; what one raises is logged and does not reach the run.
run_completed = Signal()


class ExecuteOptions(TypedDict, total=False):
    """The options of :func:`aexecute` after its row (see there)."""

    llm: LLM | None
    robot_options: Mapping[str, Any] | None
    on_event: EventCallback | None
    raise_errors: bool


class RunFailedError(RobotLabError, RuntimeError):
    """A robot run failed; ``result`` is the stored (``failed``) row and ``__cause__`` the error."""

    def __init__(self, result: RobotResult) -> None:
        self.result = result
        super().__init__(f"Robot '{result.robot_name}' failed on thread {result.thread_id} "
                         f"(run #{result.sequence_number}): {result.error_type}: {result.error}")


def _store_failure(row: RobotResult, error: BaseException, work: Work | None, started: float) -> None:
    fields: dict[str, Any] = {
        "status": Status.FAILED, "error": str(error) or type(error).__name__,
        "error_type": type(error).__name__, "error_kind": failure_data(error).get("error_kind", ""),
        "duration": time.monotonic() - started,
    }
    if work is not None:
        fields.update(work.partial())
    save_row(row, fields)
    logger.warning("robotlab: robot %r failed on thread %s: %s: %s", row.robot_name, row.thread_id,
                   fields["error_type"], fields["error"])


def _store_unstorable(row: RobotResult, error: BaseException, work: Work, started: float) -> None:
    """Store ``row`` as ``failed`` because its outcome could not be stored: with what it did so far, else without."""
    logger.error("robotlab: the result of run %s (robot %r, thread %s) could not be stored", row.run_id,
                 row.robot_name, row.thread_id, exc_info=error)
    fields: dict[str, Any] = {
        "status": Status.FAILED, "error_type": type(error).__name__, "duration": time.monotonic() - started,
        "error": f"The run's result could not be stored ({type(error).__name__}); see the worker's log.",
    }
    try:
        save_row(row, {**fields, **work.partial()})
    except Exception:  # what it did is what cannot be stored: the failure alone
        save_row(row, fields)


class _Ending:
    """Holds a run's own ``run.completed`` and what follows it (``stream.ended``) until its row is stored.

    A page must never see a run complete and then fail: when the row cannot be stored, the run fails and only
    ``run.failed`` goes out; when it was cancelled as it finished, only ``run.cancelled``.
    """

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.held: list[Event] = []
        self.published = False  # events went out after the stream (which then sends no sweep of its own)

    def wrap(self, callback: EventCallback) -> EventCallback:
        """``callback``, minus the events held (a network's task robots' ``run.completed`` pass: they carry a task)."""

        def on_event(event: Event) -> Any:
            if self.held or (event.kind == RUN_COMPLETED and event.run_id == self.run_id
                             and "task" not in (event.data or {})):
                self.held.append(event)
                return None
            return callback(event)

        return on_event

    async def release(self, row: RobotResult, on_event: EventCallback | None) -> None:
        """Store and send the held events, numbered as they would have been, once the row is stored."""
        self.published = True
        await apublish_events(row, [(event.kind, dict(event.data or {})) for event in self.held])
        if on_event is not None:
            for event in self.held:
                on_event(event)


    async def stop(self, row: RobotResult, partial: dict[str, Any]) -> None:
        """The cancel won: :func:`robotlab_django.runs.watch.astop_cancelled` (the held events are dropped)."""
        self.published = True
        await watch.astop_cancelled(row, partial)

    async def fail(self, row: RobotResult) -> None:
        """The run failed after its stream (or before it): ``run.failed`` and ``stream.ended``."""
        self.published = True
        await apublish_failure(row, row.error, row.error_type, row.error_kind)


def _stopped(work: Work | None, started: float) -> dict[str, Any]:
    """What a cancelled run keeps besides the text it streamed: its messages, tokens and duration."""
    return {"duration": time.monotonic() - started, **(work.partial() if work else {})}


async def aexecute(row: RobotResult, *, llm: LLM | None = None, robot_options: Mapping[str, Any] | None = None,
                   on_event: EventCallback | None = None, raise_errors: bool = True) -> RobotResult:
    """Run the claimed (``running``) ``row``'s robot or network and store what it did.

    Args:
        row: The claimed result row.
        llm: The LLM to use (see :func:`robotlab_django.runs.runnables.build_robot`).
        robot_options: More options for the robot's (or network's) factory.
        on_event: Receives every :class:`robotlab.streaming.Event` of the run.
        raise_errors: Raise :class:`RunFailedError` when the run fails (the row is stored as
            ``failed`` either way).

    Returns:
        The row, ``completed`` or ``failed``; ``awaiting`` when its robot asked the user a question
        (:mod:`robotlab_django.runs.watch`), ``cancelled`` when it was cancelled meanwhile (with the
        reply streamed so far).
    """
    ending = _Ending(row.run_id)
    try:
        with traced(row):  # ROBOTLAB["TRACES"]: the run's spans are kept on its row
            return await _aexecute(row, ending, llm=llm, robot_options=robot_options, on_event=on_event,
                                   raise_errors=raise_errors)
    finally:  # one sweep, after the run's last events (those sent after its stream, when there are any)
        if not ending.published:
            await asweep(row)


async def _aexecute(row: RobotResult, ending: _Ending, *, llm: LLM | None, robot_options: Mapping[str, Any] | None,
                    on_event: EventCallback | None, raise_errors: bool) -> RobotResult:
    started = time.monotonic()
    work: Work | None = None
    try:
        gate = await blocking(_admit, row)
        work = await blocking(prepare, row, llm=llm, options=robot_options, gate=gate)
        prepared = work
        value = await watch.watch(row, astream_run(
            row.thread_id, row.pk,
            lambda callback: prepared.arun(prepared.message, run_id=row.run_id, on_event=ending.wrap(callback)),
            on_event=on_event, sweep=False))
    except RunParked as parked:  # no process waits: the answer queues the row again
        await blocking(watch.park, row, parked.request.to_dict(), work.partial() if work else None)
        return row
    except watch.RunCancelledError:
        await ending.stop(row, _stopped(work, started))
        return row
    except Exception as exc:
        await blocking(_store_failure, row, exc, work, started)
        if row.status == Status.CANCELLED:  # cancelled before the failure was stored: the cancel wins
            await ending.stop(row, _stopped(work, started))
        if row.status == Status.CANCELLED:
            return row
        if work is None:  # it failed before streaming anything: tell the watchers
            await ending.fail(row)
        if raise_errors:
            raise RunFailedError(row) from exc
        return row
    try:
        outcome = work.completed(row, value, time.monotonic() - started)
        stored = await blocking(store_outcome, row, outcome)
    except Exception as exc:  # the run ended, but what it did cannot be stored: it fails, never stays running
        await blocking(_store_unstorable, row, exc, work, started)
        if row.status == Status.CANCELLED:  # cancelled as it finished: the cancel wins
            await ending.stop(row, _stopped(work, started))
        else:  # its own events said it completed: the last ones say it failed
            await ending.fail(row)
        if raise_errors and row.status == Status.FAILED:
            raise RunFailedError(row) from exc
        return row
    if not stored:  # cancelled as it finished: the cancel wins
        await ending.stop(row, _stopped(work, started))
        return row
    await ending.release(row, on_event)  # stored: now it completed
    if row.status == Status.COMPLETED:
        await blocking(_announce, row)
    if raise_errors and row.status == Status.FAILED:
        raise RunFailedError(row)
    return row


def _announce(row: RobotResult) -> None:
    """Send :data:`run_completed` for ``row``; a receiver's error is logged."""
    for receiver, outcome in run_completed.send_robust(sender=type(row), row=row):
        if isinstance(outcome, Exception):
            logger.error("robotlab: %r failed after run %s completed", receiver, row.run_id, exc_info=outcome)


def _admit(row: RobotResult) -> admission.RunGate | None:
    """``row``'s gate to the daily budgets (``ROBOTLAB["BUDGETS"]``), once it is admitted; ``None`` without any.

    Each model call of the run reserves and reconciles through it (:mod:`robotlab_django.accounting.admission`).

    Raises:
        BudgetExceeded: a daily budget of the run is spent; the run fails before it starts.
    """
    gate = admission.gate_for(row)
    if gate is not None:
        gate.admit()
    return gate


def execute(row: RobotResult, *, llm: LLM | None = None, robot_options: Mapping[str, Any] | None = None,
            on_event: EventCallback | None = None, raise_errors: bool = True) -> RobotResult:
    """:func:`aexecute` from sync code."""
    return call_sync(aexecute, row, llm=llm, robot_options=robot_options, on_event=on_event,
                     raise_errors=raise_errors)


def _load_and_claim(result: RobotResult | int, worker: tuple[str, int]) -> tuple[RobotResult, bool]:
    row = swappable.result_model().objects.get(pk=result) if isinstance(result, int) else result

    return row, claims.claim(row, worker=worker[0], worker_pid=worker[1])


async def aexecute_run(result: RobotResult | int, *, llm: LLM | None = None,
                       robot_options: Mapping[str, Any] | None = None, on_event: EventCallback | None = None,
                       raise_errors: bool = True) -> RobotResult:
    """Run a queued result: claim it, build the robot (or network) with the thread's history, run, store.

    Args:
        result: The row or its primary key.
        llm: The LLM to use (see :func:`robotlab_django.runs.runnables.build_robot`).
        robot_options: More options for the robot's factory.
        on_event: Receives every :class:`robotlab.streaming.Event` of the run.
        raise_errors: Raise :class:`RunFailedError` when the run fails (the row is stored as
            ``failed`` either way).

    Returns:
        The row, ``completed`` or ``failed``; unchanged when another worker had claimed it. Its ``worker`` and
        ``worker_pid`` name who claimed it (the Celery hostname, else this host's name, and the process id).
    """
    return await _aexecute_run(result, current_worker(), llm=llm, robot_options=robot_options, on_event=on_event,
                               raise_errors=raise_errors)


async def _aexecute_run(result: RobotResult | int, worker: tuple[str, int],
                        **options: Unpack[ExecuteOptions]) -> RobotResult:
    row, claimed = await blocking(_load_and_claim, result, worker)
    if not claimed:
        return row
    return await aexecute(row, **options)


def execute_run(result: RobotResult | int, *, llm: LLM | None = None, robot_options: Mapping[str, Any] | None = None,
                on_event: EventCallback | None = None, raise_errors: bool = True) -> RobotResult:
    """:func:`aexecute_run` from sync code (a job's thread: the one where Celery's current task is known)."""
    return call_sync(_aexecute_run, result, current_worker(), llm=llm, robot_options=robot_options,
                     on_event=on_event, raise_errors=raise_errors)


async def arun_robot(thread: ThreadRef, robot: object, message: object, *, user: _AnyUser | None = None,
                     llm: LLM | None = None, robot_options: Mapping[str, Any] | None = None,
                     on_event: EventCallback | None = None, task_id: str = "", raise_errors: bool = True,
                     attachments: object = None) -> RobotResult:
    """Run ``robot`` on ``thread`` with ``message`` now, continuing the thread's conversation.

    ``await arun_robot("session-1", "support", "Where is my order?")`` creates the thread if needed,
    restores its history into a fresh ``support`` robot (or network), runs it and returns the stored
    :class:`~robotlab_django.models.RobotResult` row (``reply``, tokens, cost, ...). ``attachments`` are
    files sent with the message (see :func:`~robotlab_django.runs.records.start_run`).

    Raises:
        UnknownRobotError: no robot has that name (nothing is written).
        ValueError: the message is too long, or an attachment bad or too large (nothing is written).
        RunFailedError: the robot failed (the row is stored as ``failed``); not with ``raise_errors=False``.
    """
    row = await blocking(start_run, thread, robot, message, user=user, task_id=task_id, attachments=attachments)
    return await aexecute_run(row, llm=llm, robot_options=robot_options, on_event=on_event,
                              raise_errors=raise_errors)


def run_robot(thread: ThreadRef, robot: object, message: object, *, user: _AnyUser | None = None,
              llm: LLM | None = None, robot_options: Mapping[str, Any] | None = None,
              on_event: EventCallback | None = None, task_id: str = "", raise_errors: bool = True,
              attachments: object = None) -> RobotResult:
    """:func:`arun_robot` from sync code: ``run_robot("session-1", "support", "Where is my order?")``."""
    return call_sync(arun_robot, thread, robot, message, user=user, llm=llm, robot_options=robot_options,
                     on_event=on_event, task_id=task_id, raise_errors=raise_errors, attachments=attachments)


def deliver(result_id: int, *, retried: bool = False, redelivered: bool = False) -> dict[str, Any]:
    """What a background job does with the row ``result_id``.

    Admit it (:func:`robotlab_django.runs.claims.admit`), then claim, run and store it. A row of a distributed network
    turn (its start, or one of its tasks) runs through :func:`robotlab_django.networks.distributed.execute`, which
    announces the task rows it queued. A retry or redelivery also delivers again the task rows the message's job
    ran itself and did not finish (:func:`robotlab_django.networks.inline.rows_of_message`). A reply held behind
    an active one of its thread is skipped (it is dispatched once that one ends); after a delivery, the thread's
    next reply is released (:func:`robotlab_django.runs.thread_queue.release`).

    Returns:
        ``{"result_id", "run_id", "status", "attempts", "skipped"}``; ``skipped`` is true when the
        run was missing, already claimed or finished (a duplicate delivery), out of attempts, or held.
    """
    return _deliver(result_id, retried=retried, redelivered=redelivered, resume=True)


def _deliver(result_id: int, *, retried: bool, redelivered: bool, resume: bool) -> dict[str, Any]:
    row, skipped = claims.admit(result_id, retried=retried, redelivered=redelivered)
    if row is None:
        return {"result_id": result_id, "run_id": "", "status": "missing", "attempts": 0, "skipped": True}
    reply = row.parent_id is None and not row.delegated_by  # a thread's reply, not a network's task row
    if reply and not skipped and thread_queue.held(row.pk):  # a reply of its thread is active: dispatched after it
        return {"result_id": row.pk, "run_id": row.run_id, "status": str(row.status), "attempts": row.attempts,
                "skipped": True}
    with claims.executing(row.pk):
        row = _deliver_admitted(row, skipped, retried)
    if reply:
        thread_queue.release(row.thread_id)  # the thread's next reply may run now
    if resume and (retried or redelivered):  # the task rows its job ran itself are the message's work too
        for pk in network_turns.rows_of_message(row):
            _deliver(pk, retried=retried, redelivered=redelivered, resume=False)
    return {"result_id": row.pk, "run_id": row.run_id, "status": str(row.status), "attempts": row.attempts,
            "skipped": skipped}


def _deliver_admitted(row: RobotResult, skipped: bool, retried: bool) -> RobotResult:

    if skipped:
        network_turns.settle_exhausted(row)  # a network task out of attempts fails its turn
    elif network_turns.is_distributed(row):
        row, _queued = network_turns.execute(row)  # one job of a distributed network turn
    else:
        row = execute_run(row, raise_errors=False)
    if retried:  # the earlier attempt may have stopped while it sent the task rows it queued
        network_turns.resend_unsent(row)
    return row
