"""A run's side of parking and cancel: park a row on its robot's question, notice a cancel, stop.

:mod:`robotlab_django.runner` and :mod:`robotlab_django.network_turns` execute a run inside :func:`watch`,
which reads the row's status every ``ROBOTLAB["CANCEL_POLL_INTERVAL"]`` seconds and stops the run when it
was cancelled (:func:`astop_cancelled` then keeps what it produced and sends ``run.cancelled``); a run
whose robot asked its user is stored ``awaiting`` by :func:`park`. Answering and cancelling from
outside are :mod:`robotlab_django.run_control`'s.

Why the row's status carries a cancel: every worker process of every executor (thread, sync, Celery)
already shares the database, and a run's own row is one indexed read; a cache key or a channel-layer
message would need Redis everywhere (the channel layer may be in-memory, per process).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from django.db import DatabaseError, transaction
from django.utils import timezone

from robotlab.errors import RobotLabError
from robotlab.streaming import RUN_CANCELLED, STREAM_ENDED, TEXT_DELTA

from . import rollups, swappable
from .abstract_models import Status
from .conf import app_settings
from .event_stream import apublish_events
from .sync_bridge import blocking

__all__ = ["RunCancelledError", "astop_cancelled", "park", "streamed_reply", "wake", "watch"]

T = TypeVar("T")

logger = logging.getLogger("robotlab_django")

#: Runs watched in this process, by row id: the callbacks that make their watch look at the row at once.
_watching: dict[Any, set[Callable[[], None]]] = {}
_watching_lock = threading.Lock()


def wake(*pks: Any) -> None:
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


def park(row: Any, request: dict[str, Any], partial: dict[str, Any] | None = None) -> bool:
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


def streamed_reply(row: Any) -> str:
    """The text ``row``'s run has streamed so far: its stored ``text.delta`` events (a network task's left out).

    A cancelled run keeps this as its reply, so the row says what its watchers saw and what a reconnecting
    client replays, whether or not its runner had noticed the cancel yet.
    """
    events = swappable.event_model().objects.filter(result_id=row.pk, kind=TEXT_DELTA)
    deltas = events.order_by("seq").values_list("data", flat=True)
    return "".join(str(data.get("text") or "") for data in deltas if isinstance(data, dict) and "task" not in data)


def _store_stopped(row: Any, fields: dict[str, Any]) -> None:
    fields = {**fields, "reply": streamed_reply(row)}
    now = timezone.now()
    rollups.update_rows(type(row).objects.filter(pk=row.pk, status=Status.CANCELLED), **fields, finished_at=now,
                        updated_at=now)
    for name, value in fields.items():
        setattr(row, name, value)
    row.status = Status.CANCELLED


async def astop_cancelled(row: Any, partial: dict[str, Any]) -> None:
    """Keep what the cancelled ``row`` produced so far (``partial`` columns.

    Messages, tokens; the reply is the text it streamed, :func:`streamed_reply`) and send ``run.cancelled`` and
    ``stream.ended``.
    """
    await blocking(_store_stopped, row, partial)
    await apublish_events(row, [(RUN_CANCELLED, {"robot": row.robot_name}), (STREAM_ENDED, {})])


def _status(row: Any) -> str:
    return str(type(row).objects.filter(pk=row.pk).values_list("status", flat=True).first() or "")


async def watch(row: Any, work: Awaitable[T]) -> T:
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
