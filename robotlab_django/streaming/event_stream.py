"""A run's event stream: coalesced, stored as ``RunEvent`` rows for replay, sent to the thread's group.

:func:`astream_run` is the one pump: it runs a robot coroutine on the current loop and collects its
:class:`robotlab.streaming.Event`\\ s; :func:`stream_run` is its thin sync wrapper (the coroutine on
RobotLab's loop, the database writes in the caller's thread, on its connection and transaction: see
:mod:`robotlab_django.runs.sync_bridge`). A :class:`~robotlab_django.streaming.coalescer.Coalescer` merges
consecutive ``text.delta`` events and says when a batch is due: ``ROBOTLAB["STREAM_FLUSH_INTERVAL"]`` seconds
after its first event, at ``ROBOTLAB["STREAM_FLUSH_DELTAS"]`` deltas, or at once for any other event. The pump
wakes when a batch starts or is due, not for every token. Each batch is one ``INSERT`` of ``RunEvent`` rows
(atomic by itself, stored before it is sent, so a client that saw an event can always replay it) and one
channel-layer message to the thread's group (:mod:`robotlab_django.streaming.broadcast`), with ``t_emit``:
when the batch left the coalescer (before it was stored and sent), so the receiver's clock minus ``t_emit`` is
the delivery latency, without the coalescing wait.

Each event is ``event.to_dict()`` (``kind``, ``run_id``, ``seq``, ``ts`` and the payload) plus
``cursor``: the ``RunEvent`` primary key, which grows with every stored event of the thread, across
runs. A client that reconnects asks for the events ``after`` its last cursor (see
:mod:`robotlab_django.chat.consumers`). A merged delta keeps the ``ts`` of its first piece and the ``seq``
of its last, so per-run ``seq`` stays monotonic (with gaps). The stored rows are the source of truth:
publishing is at-most-once. ``prev`` is the last cursor the run had stored before a batch, so a
consumer that did not get that far knows a message was lost and reads the gap from the rows; the
run's sweep heals the loss of its last batch too.

A pump that is stopped (a cancel noticed by :func:`robotlab_django.runs.watch.watch`) stores nothing its robot
emits while it unwinds: a robot's own ``run.cancelled`` and ``stream.ended`` (a network's ``run.failed``) would
end a page's reply and a protocol's stream before the text the run keeps is known. Whoever stopped it sends the
run's end (:func:`robotlab_django.runs.watch.astop_cancelled`: ``run.cancelled`` with the reply the row keeps).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from django.db import InterfaceError, OperationalError, connection
from django.db.models import Max

from robotlab.streaming import RUN_FAILED, STREAM_ENDED, Event
from robotlab_django import swappable
from robotlab_django.runs.sync_bridge import blocking, blocks_own_thread, call_sync
from robotlab_django.storable import storable
from robotlab_django.streaming.broadcast import ChannelLayer, get_layer, last_cursor, message, publish, sweep_later
from robotlab_django.streaming.coalescer import Coalescer
from robotlab_django.streaming.inserts import insert_rows
from robotlab_django.streaming.stored import events_stored

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["SEQ_BLOCK", "STORE_ATTEMPTS", "STORE_BACKOFF", "apublish_events", "apublish_failure", "astream_run",
           "asweep", "persist_events", "publish_events", "publish_failure", "stored_position", "stream_run",
           "task_block"]

logger = logging.getLogger("robotlab_django")
T = TypeVar("T")

#: Tries at storing a batch when the database answers with a transient error (a SQLite lock past its
#: busy timeout, a dropped connection), and the first wait between them, doubled each time.
STORE_ATTEMPTS = 3
STORE_BACKOFF = 0.1
#: Event numbers of the ``n``-th task of a distributed network turn start at ``n * SEQ_BLOCK`` (the turn's own
#: events below), under the turn's ``run_id`` (:mod:`robotlab_django.networks.distributed`).
SEQ_BLOCK = 100_000

Starter = Callable[[Callable[[Event], None]], Awaitable[T]]


def persist_events(thread_id: int, result_id: int, events: Sequence[Event]) -> list[dict[str, Any]]:
    """Store ``events`` as ``RunEvent`` rows (one ``INSERT``); their wire dicts with ``cursor``.

    The wire dicts carry the stored text (:func:`~robotlab_django.storable.storable`: a NUL or a lone surrogate
    replaced), so what a client sees live is what it replays; then :data:`.stored.events_stored` is sent.
    """
    model = swappable.event_model()
    stored = [Event(kind=event.kind, run_id=event.run_id, seq=event.seq, ts=event.ts, data=storable(event.data or {}))
              for event in events]
    rows = insert_rows([
        model(thread_id=thread_id, result_id=result_id, run_id=event.run_id, seq=event.seq, kind=event.kind,
              ts=event.ts, data=event.data)
        for event in stored
    ])
    events_stored.send(sender=persist_events, result_id=result_id, events=stored)  # A2A push notifications
    return [{**event.to_dict(), "cursor": row.pk} for event, row in zip(stored, rows, strict=True)]


def stored_position(result_id: int) -> tuple[int, int]:
    """The highest ``seq`` and cursor stored for the run ``result_id`` (``(0, 0)`` for none).

    A run executed again (its worker was lost) numbers its new events after the old ones, so
    ``(run_id, seq)`` stays unique and clients keep the events as new; its first batch's ``prev``
    is the old attempt's last cursor.
    """
    model = swappable.event_model()
    top = model.objects.filter(result_id=result_id).aggregate(seq=Max("seq"), cursor=Max("pk"))
    return int(top["seq"] or 0), int(top["cursor"] or 0)


def task_block(row: RobotResult) -> int:
    """Where the events of the task row ``row`` of a distributed turn are numbered from, under the turn's ``run_id``.

    ``n * SEQ_BLOCK`` for the ``n``-th task of its turn's state (the turn's own events are below ``SEQ_BLOCK``),
    so the events of every task of a turn stay unique and in order.
    """
    turn = type(row).objects.filter(pk=row.parent_id) if row.parent_id is not None else type(row).objects.none()
    state = turn.values_list("turn_state", flat=True).first() or {}
    names = [str(pair[0]) for pair in state.get("dependencies") or []]
    return (1 + names.index(row.task_name)) * SEQ_BLOCK if row.task_name in names else 0


def _shift(event: Event, offset: int) -> Event:
    if not offset:
        return event
    return Event(kind=event.kind, run_id=event.run_id, seq=event.seq + offset, ts=event.ts, data=event.data)


def _persist(thread_id: int, result_id: int, events: list[Event]) -> list[dict[str, Any]]:
    error: BaseException | None = None
    for attempt in range(1, STORE_ATTEMPTS + 1):
        try:
            return persist_events(thread_id, result_id, events)
        except (OperationalError, InterfaceError) as exc:  # transient: try again on a fresh connection
            error = exc
            if attempt == STORE_ATTEMPTS:
                break
            logger.warning("robotlab: storing %d events of thread %s failed (%s); retrying", len(events),
                           thread_id, exc)
            if not connection.in_atomic_block:  # a broken connection is replaced on the next query
                connection.close()
            time.sleep(STORE_BACKOFF * 2 ** (attempt - 1))
        except Exception as exc:
            error = exc
            break
    # storage must never fail the run; the live copy still goes out, but replay will not have it
    logger.error("robotlab: could not store %d events of thread %s", len(events), thread_id, exc_info=error)
    return [event.to_dict() for event in events]


def _tee(target: Callable[[Event], Any], extra: Callable[[Event], Any] | None) -> Callable[[Event], None]:
    def on_event(event: Event) -> None:
        target(event)
        if extra is not None:
            extra(event)

    return on_event


class _Batches:
    """A run's coalescer: filled by the robot's events on its loop, drained where the rows are written.

    The pump sleeps until a batch is due (its first event starts the timer) instead of waking for
    every token. The batch leaves the coalescer in the thread that stores it (:meth:`store`), so the
    deltas that come while that thread wakes up join it, and ``t_emit`` is when it left.
    """

    def __init__(self, buffer: Coalescer, offset: int) -> None:
        self._buffer = buffer
        self._offset = offset
        self._lock = threading.Condition()
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._cut = False

    def put(self, event: Event) -> None:
        """Buffer ``event`` (on the robot's loop); wake the pump when it starts a batch or makes one due.

        Nothing once the pump was stopped (:meth:`cut`).
        """
        with self._lock:
            if self._cut:
                return
            first = self._buffer.time_left() is None
            self._buffer.add(_shift(event, self._offset))
            wake = first or self._buffer.is_due
            if wake:
                self._lock.notify()
        if wake:
            if threading.get_ident() == self._loop_thread:
                self._release()
            else:
                self._loop.call_soon_threadsafe(self._release)

    def _release(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def cut(self) -> None:
        """The pump stopped: what the robot emits from now on (as it unwinds) is left out.

        What was buffered before stays: a store already waiting in the sync caller's thread writes it.
        """
        with self._lock:
            self._cut = True

    def close(self) -> None:
        """No more events: :meth:`due` and :meth:`wait_and_store` return at once."""
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._release()

    async def due(self) -> bool:
        """Wait until a batch is due or the run ended; ``True`` when it ended."""
        while True:
            with self._lock:
                left = self._buffer.time_left()
                if self._closed or left == 0.0:
                    return self._closed
                self._waiter = self._loop.create_future()
            timer = None if left is None else self._loop.call_later(left, self._release)
            try:
                await self._waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()

    def store(self, thread_id: int, result_id: int) -> tuple[list[dict[str, Any]], float]:
        """Drain the batch and store it (in the thread that writes the rows): its wire dicts, and when it left."""
        with self._lock:
            batch = self._buffer.drain()
        emitted = time.time()
        return (_persist(thread_id, result_id, batch) if batch else []), emitted

    def wait_and_store(self, thread_id: int, result_id: int) -> tuple[bool, list[dict[str, Any]], float]:
        """:meth:`due` then :meth:`store`, waiting in the calling thread (a sync caller's own).

        Whether the run ended, the batch's wire dicts, and when it left. The timer then does not queue behind the
        robots' work on their loop. With nothing buffered it gives the thread back after one flush interval (an
        empty batch), so other blocking work of the same call waits at most that long.
        """
        deadline = time.monotonic() + self._buffer.interval
        with self._lock:
            while True:
                left = self._buffer.time_left()
                if self._closed or left == 0.0:
                    break
                wait = deadline - time.monotonic() if left is None else left
                if wait <= 0:
                    break
                self._lock.wait(wait)
            closed = self._closed
        return (closed, *self.store(thread_id, result_id))


async def astream_run(thread_id: int, result_id: int, start: Starter[T], *,
                      on_event: Callable[[Event], Any] | None = None, layer: ChannelLayer | None = None,
                      sweep: bool = True, first: bool = False, block: int = 0) -> T:
    """Run ``start(on_event)`` on the current loop, storing and publishing its events as they come.

    The rows are written through :func:`~robotlab_django.runs.sync_bridge.blocking` (the sync caller's
    thread under :func:`stream_run`, which then also waits for each batch to be due), and each batch
    leaves the coalescer there.

    Args:
        thread_id: The thread's primary key (the group and the rows' thread).
        result_id: The run's ``RobotResult`` primary key.
        start: Given the event callback, returns the robot coroutine
            (``lambda cb: robot.arun(text, on_event=cb)``).
        on_event: Also receives every raw event (on the robot's loop).
        layer: The channel layer; defaults to :func:`~.broadcast.get_layer` (``None``: store only).
        sweep: Sweep after the last batch; ``False`` when the caller sends the run's last events itself (the
            runner holds a robot's ``run.completed`` until its row is stored) and so its sweep (:func:`asweep`).
        first: The run has stored no event yet (its row's first execution, never parked: see
            :func:`robotlab_django.runs.records.first_execution`), so its position is not read
            (:func:`stored_position`).
        block: Where the run's events are numbered from already (a distributed task's block, :data:`SEQ_BLOCK`):
            a run executed again numbers its new events after its stored ones, within that block.

    Returns:
        What the coroutine returned; its exception is raised after the last batch went out. A pump that is
        cancelled cancels the coroutine and stores none of the events it emits from then on (see the module docs).
    """
    layer = get_layer() if layer is None else layer
    offset, prev = (0, 0) if first else await blocking(stored_position, result_id)
    offset = max(0, offset - block) if offset else 0
    batches = _Batches(Coalescer.from_settings(), offset)
    task = asyncio.ensure_future(start(_tee(batches.put, on_event)))
    task.add_done_callback(lambda _: batches.close())
    done, own_thread = False, blocks_own_thread()
    try:
        while not done:
            if own_thread:  # a sync caller's thread serves only this run: wait for the batch there
                done, payload, emitted = await blocking(batches.wait_and_store, thread_id, result_id)
            else:
                done = await batches.due()
                payload, emitted = await blocking(batches.store, thread_id, result_id)
            if payload and layer is not None:
                await publish(layer, message(thread_id, result_id, prev, payload, emitted))
            prev = last_cursor(payload, prev)
    except BaseException:  # stopped (cancelled): the robot's own end, as it unwinds, is not the run's
        batches.cut()
        task.cancel()
        raise
    if layer is not None and sweep:
        sweep_later(layer, message(thread_id, result_id, prev, [], time.time()))
    return await task


async def asweep(row: RobotResult) -> None:
    """Sweep ``row``'s run: its last stored cursor, sent a little later (a stream run with ``sweep=False``)."""
    layer = get_layer()
    if layer is not None:
        _seq, cursor = await blocking(stored_position, row.pk)
        sweep_later(layer, message(row.thread_id, row.pk, cursor, [], time.time()))


def stream_run(thread_id: int, result_id: int, start: Starter[T], *,
               on_event: Callable[[Event], Any] | None = None, layer: ChannelLayer | None = None) -> T:
    """:func:`astream_run` from sync code: the robot on RobotLab's loop, the rows written in this thread."""
    return call_sync(astream_run, thread_id, result_id, start, on_event=on_event, layer=layer)


async def apublish_events(row: RobotResult, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Store and send ``events`` (``(kind, data)`` pairs) of ``row``'s run after its last stored event.

    For events no running robot sends: a failure before the robot ran, an answer to a parked run's
    question, the cancel of a run no worker holds. A task row of a distributed network turn sends them under the
    turn's ``run_id``, as its other events (a page shows the turn, never a bubble per task): after its own
    stored events, or, when its task never ran, from the start of its task's block (:func:`task_block`).
    """
    offset, prev = await blocking(stored_position, row.pk)
    now = time.time()
    run_id = row.run_id
    if getattr(row, "parent_id", None) is not None and getattr(row, "task_name", None):
        # never ran (a queued task of a cancelled turn): numbered in its task's block
        offset = offset or await blocking(task_block, row)
        if offset:  # the turn's run id: a task is no run of its own on a page
            run_id = run_id.rpartition(".")[0] or run_id
    stored = [Event(kind=kind, run_id=run_id, seq=offset + index, ts=now, data=dict(data))
              for index, (kind, data) in enumerate(events, start=1)]
    payload = await blocking(_persist, row.thread_id, row.pk, stored)
    layer = get_layer()
    if layer is not None:
        await publish(layer, message(row.thread_id, row.pk, prev, payload, now))
        sweep_later(layer, message(row.thread_id, row.pk, last_cursor(payload, prev), [], now))


def publish_events(row: RobotResult, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """:func:`apublish_events` from sync code."""
    call_sync(apublish_events, row, events)


async def apublish_failure(row: RobotResult, error: str, error_type: str, error_kind: str = "") -> None:
    """Store and send ``run.failed`` and ``stream.ended`` for a run that failed before its robot ran.

    ``error_kind`` is a model provider failure's kind (the row's ``error_kind``), sent only when there is one.
    """
    data = {"robot": row.robot_name, "error": error, "error_type": error_type}
    if error_kind:
        data["error_kind"] = error_kind
    await apublish_events(row, [(RUN_FAILED, data), (STREAM_ENDED, {})])


def publish_failure(row: RobotResult, error: str, error_type: str, error_kind: str = "") -> None:
    """:func:`apublish_failure` from sync code."""
    call_sync(apublish_failure, row, error, error_type, error_kind)
