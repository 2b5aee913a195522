"""Executing runs: one async path for robots and networks, with thin sync wrappers.

:func:`aexecute` is the leaf unit of work: given a claimed (``running``) result row, it prepares the
row's :class:`~robotlab_django.runnables.Work` (a robot with the thread's history, or a network turn),
runs ``runnable.arun(message, run_id=row.run_id, on_event=...)`` through the event pump
(:func:`robotlab_django.event_stream.astream_run`: every event stored and sent to the thread's group),
and stores the outcome one way (:func:`robotlab_django.records.store_outcome`), or the error. Each LLM
call and tool call of a robot run is checkpointed as it completes (:mod:`robotlab_django.checkpoints`),
so an execution after a lost worker replays them.

:func:`aexecute_run` claims a queued row first (:func:`robotlab_django.claims.claim`: a second worker
given the same row does nothing); :func:`arun_robot` queues the row too. Each has a sync twin that is a
thin wrapper (:func:`robotlab_django.sync_bridge.call_sync`: the coroutine on RobotLab's loop, the
database work in the caller's thread). :func:`deliver` is what a background job does with a row it was
handed (a Celery task, a re-queue): admit it (:func:`robotlab_django.claims.admit`), then execute it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from robotlab.errors import RobotLabError
from robotlab.streaming import Event
from robotlab.tools.parking import RunParked

from . import budgets, claims, network_turns, run_watch, swappable
from .abstract_models import Status
from .conf import BUDGET_LIMITS, app_settings
from .event_stream import apublish_failure, astream_run
from .records import save_row, start_run, store_outcome
from .runnables import Work, prepare
from .sync_bridge import blocking, call_sync

__all__ = ["RunFailedError", "aexecute", "aexecute_run", "arun_robot", "deliver", "execute", "execute_run",
           "run_robot"]

logger = logging.getLogger("robotlab_django")

EventCallback = Callable[[Event], Any]


class RunFailedError(RobotLabError, RuntimeError):
    """A robot run failed; ``result`` is the stored (``failed``) row and ``__cause__`` the error."""

    def __init__(self, result: Any) -> None:
        self.result = result
        super().__init__(f"Robot '{result.robot_name}' failed on thread {result.thread_id} "
                         f"(run #{result.sequence_number}): {result.error_type}: {result.error}")


def _store_failure(row: Any, error: BaseException, work: Work | None, started: float) -> None:
    fields: dict[str, Any] = {
        "status": Status.FAILED, "error": str(error) or type(error).__name__,
        "error_type": type(error).__name__, "duration": time.monotonic() - started,
    }
    if work is not None:
        fields.update(work.partial())
    save_row(row, fields)
    logger.warning("robotlab: robot %r failed on thread %s: %s: %s", row.robot_name, row.thread_id,
                   fields["error_type"], fields["error"])


def _stopped(work: Work | None, started: float) -> dict[str, Any]:
    """What a cancelled run keeps besides the text it streamed: its messages, tokens and duration."""
    return {"duration": time.monotonic() - started, **(work.partial() if work else {})}


async def aexecute(row: Any, *, llm: Any = None, robot_options: Mapping[str, Any] | None = None,
                   on_event: EventCallback | None = None, raise_errors: bool = True) -> Any:
    """Run the claimed (``running``) ``row``'s robot or network and store what it did.

    Args:
        row: The claimed result row.
        llm: The LLM to use (see :func:`robotlab_django.runnables.build_robot`).
        robot_options: More options for the robot's (or network's) factory.
        on_event: Receives every :class:`robotlab.streaming.Event` of the run.
        raise_errors: Raise :class:`RunFailedError` when the run fails (the row is stored as
            ``failed`` either way).

    Returns:
        The row, ``completed`` or ``failed``; ``awaiting`` when its robot asked the user a question
        (:mod:`robotlab_django.run_watch`), ``cancelled`` when it was cancelled meanwhile (with the
        reply streamed so far).
    """
    started = time.monotonic()
    work: Work | None = None
    reservation: budgets.Reservation | None = None
    try:
        reservation = await blocking(_reserve, row)
        work = await blocking(prepare, row, llm=llm, options=robot_options)
        prepared = work
        value = await run_watch.watch(row, astream_run(
            row.thread_id, row.pk,
            lambda callback: prepared.arun(prepared.message, run_id=row.run_id, on_event=callback),
            on_event=on_event))
    except RunParked as parked:  # no process waits: the answer queues the row again
        await blocking(run_watch.park, row, parked.request.to_dict(), work.partial() if work else None)
        await _reconcile(reservation, row)
        return row
    except run_watch.RunCancelledError:
        await run_watch.astop_cancelled(row, _stopped(work, started))
        await _reconcile(reservation, row)
        return row
    except Exception as exc:
        await blocking(_store_failure, row, exc, work, started)
        if row.status == Status.CANCELLED:  # cancelled before the failure was stored: the cancel wins
            await run_watch.astop_cancelled(row, _stopped(work, started))
        await _reconcile(reservation, row)
        if row.status == Status.CANCELLED:
            return row
        if work is None:  # it failed before streaming anything: tell the watchers
            await apublish_failure(row, row.error, row.error_type)
        if raise_errors:
            raise RunFailedError(row) from exc
        return row
    outcome = work.completed(row, value, time.monotonic() - started)
    stored = await blocking(store_outcome, row, outcome)
    if not stored:  # cancelled as it finished: the cancel wins
        await run_watch.astop_cancelled(row, _stopped(work, started))
    await _reconcile(reservation, row)  # with the tokens the row now holds
    if not stored:
        return row
    if raise_errors and row.status == Status.FAILED:
        raise RunFailedError(row)
    return row


def _reserve(row: Any) -> budgets.Reservation | None:
    """Reserve ``row``'s run against the daily budgets (``ROBOTLAB["BUDGETS"]``); ``None`` without any."""
    limits = app_settings.BUDGETS
    if all(limits[key] is None for key in BUDGET_LIMITS):
        return None
    user_id = swappable.thread_model().objects.filter(pk=row.thread_id).values_list("user_id", flat=True).first()
    return budgets.reserve_run(user_id, row.robot_name)


async def _reconcile(reservation: budgets.Reservation | None, row: Any) -> None:
    if reservation is not None:
        tokens = int(row.input_tokens or 0) + int(row.output_tokens or 0)
        await blocking(budgets.reconcile_run, reservation, tokens=tokens, cost=row.cost)


def execute(row: Any, *, llm: Any = None, robot_options: Mapping[str, Any] | None = None,
            on_event: EventCallback | None = None, raise_errors: bool = True) -> Any:
    """:func:`aexecute` from sync code."""
    return call_sync(aexecute, row, llm=llm, robot_options=robot_options, on_event=on_event,
                     raise_errors=raise_errors)


def _load_and_claim(result: Any) -> tuple[Any, bool]:
    model = swappable.result_model()
    row = result if isinstance(result, model) else model.objects.get(pk=result)
    return row, claims.claim(row)


async def aexecute_run(result: Any, *, llm: Any = None, robot_options: Mapping[str, Any] | None = None,
                       on_event: EventCallback | None = None, raise_errors: bool = True) -> Any:
    """Run a queued result: claim it, build the robot (or network) with the thread's history, run, store.

    Args:
        result: The row or its primary key.
        llm: The LLM to use (see :func:`robotlab_django.runnables.build_robot`).
        robot_options: More options for the robot's factory.
        on_event: Receives every :class:`robotlab.streaming.Event` of the run.
        raise_errors: Raise :class:`RunFailedError` when the run fails (the row is stored as
            ``failed`` either way).

    Returns:
        The row, ``completed`` or ``failed``; unchanged when another worker had claimed it.
    """
    row, claimed = await blocking(_load_and_claim, result)
    if not claimed:
        return row
    return await aexecute(row, llm=llm, robot_options=robot_options, on_event=on_event, raise_errors=raise_errors)


def execute_run(result: Any, *, llm: Any = None, robot_options: Mapping[str, Any] | None = None,
                on_event: EventCallback | None = None, raise_errors: bool = True) -> Any:
    """:func:`aexecute_run` from sync code."""
    return call_sync(aexecute_run, result, llm=llm, robot_options=robot_options, on_event=on_event,
                     raise_errors=raise_errors)


async def arun_robot(thread: Any, robot: Any, message: Any, *, user: Any = None, llm: Any = None,
                     robot_options: Mapping[str, Any] | None = None, on_event: EventCallback | None = None,
                     task_id: str = "", raise_errors: bool = True, attachments: Any = None) -> Any:
    """Run ``robot`` on ``thread`` with ``message`` now, continuing the thread's conversation.

    ``await arun_robot("session-1", "support", "Where is my order?")`` creates the thread if needed,
    restores its history into a fresh ``support`` robot (or network), runs it and returns the stored
    :class:`~robotlab_django.models.RobotResult` row (``reply``, tokens, cost, ...). ``attachments`` are
    files sent with the message (see :func:`~robotlab_django.records.start_run`).

    Raises:
        UnknownRobotError: no robot has that name (nothing is written).
        ValueError: the message is too long, or an attachment bad or too large (nothing is written).
        RunFailedError: the robot failed (the row is stored as ``failed``); not with ``raise_errors=False``.
    """
    row = await blocking(start_run, thread, robot, message, user=user, task_id=task_id, attachments=attachments)
    return await aexecute_run(row, llm=llm, robot_options=robot_options, on_event=on_event,
                              raise_errors=raise_errors)


def run_robot(thread: Any, robot: Any, message: Any, *, user: Any = None, llm: Any = None,
              robot_options: Mapping[str, Any] | None = None, on_event: EventCallback | None = None,
              task_id: str = "", raise_errors: bool = True, attachments: Any = None) -> Any:
    """:func:`arun_robot` from sync code: ``run_robot("session-1", "support", "Where is my order?")``."""
    return call_sync(arun_robot, thread, robot, message, user=user, llm=llm, robot_options=robot_options,
                     on_event=on_event, task_id=task_id, raise_errors=raise_errors, attachments=attachments)


def deliver(result_id: Any, *, retried: bool = False, redelivered: bool = False) -> dict[str, Any]:
    """What a background job does with the row ``result_id``.

    Admit it (:func:`robotlab_django.claims.admit`), then claim, run and store it. A row of a distributed network
    turn (its start, or one of its tasks) runs through :func:`robotlab_django.network_turns.execute`, which
    announces the task rows it queued.

    Returns:
        ``{"result_id", "run_id", "status", "attempts", "skipped"}``; ``skipped`` is true when the
        run was missing, already claimed or finished (a duplicate delivery), or out of attempts.
    """
    row, skipped = claims.admit(result_id, retried=retried, redelivered=redelivered)
    if row is None:
        return {"result_id": result_id, "run_id": "", "status": "missing", "attempts": 0, "skipped": True}
    if skipped:
        network_turns.settle_exhausted(row)  # a network task out of attempts fails its turn
    elif network_turns.is_distributed(row):
        row, _queued = network_turns.execute(row)  # one job of a distributed network turn
    else:
        row = execute_run(row, raise_errors=False)
    if retried:  # the earlier attempt may have stopped while it sent the task rows it queued
        network_turns.resend_unsent(row)
    return {"result_id": row.pk, "run_id": row.run_id, "status": str(row.status), "attempts": row.attempts,
            "skipped": skipped}
