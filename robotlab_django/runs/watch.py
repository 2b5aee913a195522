"""A run's side of parking and cancel: park a row on its robot's question, notice a cancel, stop.

:mod:`robotlab_django.runs.runner` and :mod:`robotlab_django.networks.distributed` execute a run inside :func:`watch`,
which reads the row's status every ``ROBOTLAB["CANCEL_POLL_INTERVAL"]`` seconds and stops the run when it
was cancelled (:func:`astop_cancelled` then keeps what it produced and sends ``run.cancelled``); a run
whose robot asked its user is stored ``awaiting`` by :func:`park`. Answering and cancelling from
outside are :mod:`robotlab_django.runs.control`'s.

Why the row's status carries a cancel: every worker process of every executor (thread, sync, Celery)
already shares the database, and a run's own row is one indexed read; a cache key or a channel-layer
message would need Redis everywhere (the channel layer may be in-memory, per process).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import DatabaseError, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from robotlab.errors import RobotLabError
from robotlab.streaming import RUN_CANCELLED, RUN_STARTED, STEP_STARTED, STREAM_ENDED, TEXT_DELTA
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.accounting import rollups
from robotlab_django.conf import app_settings
from robotlab_django.runs.sync_bridge import blocking
from robotlab_django.streaming.event_stream import apublish_events, publish_events
from robotlab_django.streaming.streamed_text import Part, attempt_texts

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["STOP_GRACE", "RunCancelledError", "astop_cancelled", "cancelled_events", "park", "stopping",
           "streamed_reply", "turn_stopped", "wake", "watch"]

T = TypeVar("T")

logger = logging.getLogger("robotlab_django")

#: Runs watched in this process, by row id: the callbacks that make their watch look at the row at once.
_watching: dict[Any, set[Callable[[], None]]] = {}
_watching_lock = threading.Lock()


def wake(*pks: int) -> None:
    """Have the watches of the runs ``pks`` in this process read their row now, not at their next interval.

    A cancel made in the process that runs the run (the thread and sync executors) then stops it at once;
    in another process the run notices at its next interval.
    """
    with _watching_lock:
        callbacks = [callback for pk in pks for callback in _watching.get(pk, ())]
    for callback in callbacks:
        callback()


class RunCancelledError(RobotLabError, RuntimeError):
    """Raised by :func:`watch` when the watched run's row was cancelled and its coroutine stopped."""


def park(row: RobotResult, request: dict[str, Any], partial: dict[str, Any] | None = None) -> bool:
    """Store the running ``row`` as ``awaiting`` on ``request`` (``AskRequest.to_dict()``).

    A task row's network turn waits with it. ``False`` when the row was cancelled meanwhile.
    """
    now = timezone.now()
    fields = {"status": Status.AWAITING, "question": dict(request), "parked_at": now, "updated_at": now,
              **(partial or {})}
    with transaction.atomic(), rollups.batch():
        if not rollups.update_rows(type(row).objects.filter(pk=row.pk, status=Status.RUNNING), **fields):
            return False
        if row.parent_id is not None:  # the turn shows the question and waits
            type(row).objects.filter(pk=row.parent_id, status=Status.RUNNING).update(
                status=Status.AWAITING, question=dict(request), parked_at=now, updated_at=now)
    for name, value in fields.items():
        setattr(row, name, value)
    return True


def streamed_reply(row: RobotResult) -> str:
    """The text ``row``'s run has streamed so far, in its last attempt (:mod:`robotlab_django.streaming.streamed_text`).

    A robot run's own text deltas (a network task's on it left out); a task row's, its task's; a network turn's,
    the text of the task that started last (on the turn's row, or on its task rows when the turn is distributed),
    which is the text the chat page shows. A cancelled run keeps this as its reply, so the row says what its
    watchers saw and what a reconnecting client replays, whether or not its runner had noticed the cancel yet.
    """
    events = (swappable.event_model().objects.filter(Q(result_id=row.pk) | Q(result__parent_id=row.pk),
                                                     kind__in=(TEXT_DELTA, RUN_STARTED, STEP_STARTED))
              .order_by("pk").values_list("result_id", "kind", "data"))
    texts, last_step = attempt_texts(
        ({**(data if isinstance(data, dict) else {}), "kind": kind, "result_id": result_id}
         for result_id, kind, data in events), row.pk)
    if row.parent_id is not None and row.task_name:
        part: Part = (row.pk, row.task_name)
    else:
        part = last_step or (row.pk, "")
    return texts.get(part, "")


def _store_stopped(row: RobotResult, fields: dict[str, Any]) -> None:
    fields = {**fields, "reply": streamed_reply(row)}
    now = timezone.now()
    rollups.update_rows(type(row).objects.filter(pk=row.pk, status=Status.CANCELLED), **fields, finished_at=now,
                        updated_at=now)
    for name, value in fields.items():
        setattr(row, name, value)
    row.status = Status.CANCELLED


#: Seconds a cancelled run's runner may take to store its end; past them its worker is taken as lost (its row's
#: reply is then final as it stands). A runner notices a cancel within ``ROBOTLAB["CANCEL_POLL_INTERVAL"]``.
STOP_GRACE = 5.0


def stopping(row: RobotResult) -> bool:
    """Whether the cancelled ``row`` still waits for its runner to stop: no ``stream.ended`` stored yet.

    Its runner may stream a little more until it notices, and then stores the reply the row keeps and sends it
    with ``run.cancelled`` (:func:`astop_cancelled`); until then the row's reply is the text streamed when the
    cancel was made. ``False`` :data:`STOP_GRACE` seconds after the cancel, and for any other row.
    """
    if row.status != Status.CANCELLED or row.finished_at is None:
        return False
    if timezone.now() - row.finished_at > timedelta(seconds=STOP_GRACE):
        return False
    return not swappable.event_model().objects.filter(result_id=row.pk, kind=STREAM_ENDED).exists()


def cancelled_events(row: RobotResult) -> list[tuple[str, dict[str, Any]]]:
    """``run.cancelled`` and ``stream.ended`` of the cancelled ``row``.

    ``run.cancelled`` carries the ``reply`` the row keeps, so a page ends with exactly that text; a task row's
    events carry its task.
    """
    task = {"task": row.task_name} if row.parent_id is not None and row.task_name else {}
    return [(RUN_CANCELLED, {"robot": row.robot_name, "reply": row.reply or "", **task}), (STREAM_ENDED, task)]


def turn_stopped(turn_pk: int) -> None:
    """Announce the cancelled distributed turn ``turn_pk`` once none of its tasks is still stopping.

    A task cancelled while running is stopping until its runner stored what it produced and its ``stream.ended``.
    The turn's reply is then the text its tasks streamed (:func:`streamed_reply`), and its ``run.cancelled`` and
    ``stream.ended`` go out once, in the transaction that checks it (the turn's row locked).
    """
    model, events = swappable.result_model(), swappable.event_model()
    with transaction.atomic():
        turn = model.objects.select_for_update().filter(pk=turn_pk, status=Status.CANCELLED).first()
        if turn is None or events.objects.filter(result_id=turn.pk, kind=STREAM_ENDED).exists():
            return
        ended = events.objects.filter(result_id=OuterRef("pk"), kind=STREAM_ENDED)
        if model.objects.filter(parent_id=turn.pk, status=Status.CANCELLED).exclude(Exists(ended)).exists():
            return  # another task is still stopping: the last one announces the turn
        turn.reply = streamed_reply(turn)
        model.objects.filter(pk=turn.pk).update(reply=turn.reply, updated_at=timezone.now())
        publish_events(turn, cancelled_events(turn))


async def astop_cancelled(row: RobotResult, partial: dict[str, Any]) -> None:
    """Keep what the cancelled ``row`` produced so far and send ``run.cancelled`` and ``stream.ended``.

    ``partial`` holds its messages and tokens; the reply is the text it streamed (:func:`streamed_reply`). The last
    task of a cancelled distributed turn to stop announces its turn too.
    """
    await blocking(_store_stopped, row, partial)
    await apublish_events(row, cancelled_events(row))
    if row.parent_id is not None and row.task_name:
        await blocking(turn_stopped, row.parent_id)


def _status(row: RobotResult) -> str:
    return str(type(row).objects.filter(pk=row.pk).values_list("status", flat=True).first() or "")


async def watch(row: RobotResult, work: Awaitable[T]) -> T:
    """Await ``work`` while checking ``row``'s status every ``ROBOTLAB["CANCEL_POLL_INTERVAL"]`` seconds.

    Raises:
        RunCancelledError: the row was cancelled; ``work`` was cancelled (it stops at its next ``await``:
            between two chunks of a streaming reply).
    """
    task = asyncio.ensure_future(work)
    interval = float(app_settings.CANCEL_POLL_INTERVAL)
    loop = asyncio.get_running_loop()
    woken = asyncio.Event()

    def callback() -> None:
        loop.call_soon_threadsafe(woken.set)

    with _watching_lock:
        _watching.setdefault(row.pk, set()).add(callback)
    try:
        while True:
            waking = asyncio.ensure_future(woken.wait())
            try:
                await asyncio.wait([task, waking], timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waking.cancel()
            woken.clear()
            if task.done():
                return task.result()
            try:
                status = await blocking(_status, row)
            except DatabaseError as exc:  # a busy or dropped database: look again at the next interval
                logger.info("robotlab: could not read the status of run %s (%s); checking again", row.pk, exc)
                continue
            if status == Status.CANCELLED:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise RunCancelledError(f"Run {row.pk} was cancelled.")
    finally:
        with _watching_lock:
            callbacks = _watching.get(row.pk, set())
            callbacks.discard(callback)
            if not callbacks:
                _watching.pop(row.pk, None)
        if not task.done():
            task.cancel()
