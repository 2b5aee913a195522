"""A run's event stream: coalesced, stored as ``RunEvent`` rows for replay, sent to the thread's group.

:func:`astream_run` is the one pump: it runs a robot coroutine on the current loop and collects its
:class:`robotlab.streaming.Event`\\ s; :func:`stream_run` is its thin sync wrapper (the coroutine on
RobotLab's loop, the database writes in the caller's thread, on its connection and transaction: see
:mod:`robotlab_django.sync_bridge`). :class:`Coalescer` merges consecutive ``text.delta`` events and
says when a batch is due: ``ROBOTLAB["STREAM_FLUSH_INTERVAL"]`` seconds after its first event (a timer,
not the next token, flushes it), at ``ROBOTLAB["STREAM_FLUSH_DELTAS"]`` deltas, or at once for any other
event (``tool_call.started``, ``run.completed``, ...). The pump wakes when a batch starts or is due,
not for every token. Each batch is one ``bulk_create`` of ``RunEvent`` rows (one transaction, stored
before it is sent, so a client that saw an event can always replay it) and one channel-layer message
to the thread's group (:mod:`robotlab_django.broadcast`), with ``t_emit``: when the batch left the
coalescer (before it was stored and sent), so the receiver's clock minus ``t_emit`` is the delivery
latency, without the coalescing wait.

Each event is ``event.to_dict()`` (``kind``, ``run_id``, ``seq``, ``ts`` and the payload) plus
``cursor``: the ``RunEvent`` primary key, which grows with every stored event of the thread, across
runs. A client that reconnects asks for the events ``after`` its last cursor (see
:mod:`robotlab_django.consumers`). A merged delta keeps the ``ts`` of its first piece and the ``seq``
of its last, so per-run ``seq`` stays monotonic (with gaps). The stored rows are the source of truth:
publishing is at-most-once. ``prev`` is the last cursor the run had stored before a batch, so a
consumer that did not get that far knows a message was lost and reads the gap from the rows; the
run's sweep heals the loss of its last batch too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connection
from django.db.models import Max

from robotlab.streaming import RUN_FAILED, STREAM_ENDED, TEXT_DELTA, Event, is_delta

from . import swappable
from .broadcast import get_layer, last_cursor, message, publish, sweep_later
from .conf import app_settings
from .sync_bridge import blocking, blocks_own_thread, call_sync

__all__ = [
    "FLUSH_DELTAS",
    "FLUSH_INTERVAL",
    "STORE_ATTEMPTS",
    "STORE_BACKOFF",
    "Coalescer",
    "apublish_events",
    "apublish_failure",
    "astream_run",
    "persist_events",
    "publish_events",
    "publish_failure",
    "stored_position",
    "stream_run",
]

logger = logging.getLogger("robotlab_django")
T = TypeVar("T")

#: Seconds a batch waits for more deltas after its first event (``ROBOTLAB["STREAM_FLUSH_INTERVAL"]``).
FLUSH_INTERVAL = 0.05
#: Deltas that make a batch due before ``FLUSH_INTERVAL`` (``ROBOTLAB["STREAM_FLUSH_DELTAS"]``).
FLUSH_DELTAS = 20
#: Tries at storing a batch when the database answers with a transient error (a SQLite lock past its
#: busy timeout, a dropped connection), and the first wait between them, doubled each time.
STORE_ATTEMPTS = 3
STORE_BACKOFF = 0.1

Starter = Callable[[Callable[[Event], None]], Awaitable[T]]


class Coalescer:
    """Buffers events, merging consecutive ``text.delta`` events of a run, and says when to flush."""

    def __init__(self, interval: float = FLUSH_INTERVAL, max_deltas: int = FLUSH_DELTAS) -> None:
        self.interval = interval
        self.max_deltas = max_deltas
        self._events: list[Event] = []
        self._deltas = 0
        self._urgent = False
        self._first_at: float | None = None

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: Event) -> None:
        """Buffer ``event``.

        A ``text.delta`` right after another one of the same run (and, in a network's run, of the same task) joins
        it.
        """
        if self._first_at is None:
            self._first_at = time.monotonic()
        last = self._events[-1] if self._events else None
        joins = (last is not None and last.kind == TEXT_DELTA and last.run_id == event.run_id
                 and last.data.get("task") == event.data.get("task"))
        if event.kind == TEXT_DELTA and last is not None and joins:
            joined = f"{last.data.get('text', '')}{event.data.get('text', '')}"
            merged = {**last.data, **event.data, "text": joined}
            self._events[-1] = Event(kind=TEXT_DELTA, run_id=event.run_id, seq=event.seq, ts=last.ts,
                                     data=merged)
        else:
            self._events.append(event)
        if is_delta(event.kind):
            self._deltas += 1
        else:
            self._urgent = True

    def time_left(self) -> float | None:
        """Seconds until the buffered batch is due (0 when due now); ``None`` when empty."""
        if self._first_at is None:
            return None
        if self._urgent or self._deltas >= self.max_deltas:
            return 0.0
        return max(0.0, self._first_at + self.interval - time.monotonic())

    @property
    def is_due(self) -> bool:
        """Whether the buffered batch should be flushed now."""
        return self.time_left() == 0.0

    @classmethod
    def from_settings(cls) -> Coalescer:
        """A coalescer flushing as ``ROBOTLAB["STREAM_FLUSH_INTERVAL"]`` and ``["STREAM_FLUSH_DELTAS"]`` say."""
        return cls(float(app_settings.STREAM_FLUSH_INTERVAL), int(app_settings.STREAM_FLUSH_DELTAS))

    def drain(self) -> list[Event]:
        """The buffered (coalesced) events, emptying the buffer."""
        events, self._events = self._events, []
        self._deltas, self._urgent, self._first_at = 0, False, None
        return events


def persist_events(thread_id: Any, result_id: Any, events: Sequence[Event]) -> list[dict[str, Any]]:
    """Store ``events`` as ``RunEvent`` rows (one ``bulk_create``); their wire dicts with ``cursor``."""
    model = swappable.event_model()
    rows = model.objects.bulk_create([
        model(thread_id=thread_id, result_id=result_id, run_id=event.run_id, seq=event.seq, kind=event.kind,
              ts=event.ts, data=event.data)
        for event in events
    ])
    return [{**event.to_dict(), "cursor": row.pk} for event, row in zip(events, rows, strict=True)]


def stored_position(result_id: Any) -> tuple[int, int]:
    """The highest ``seq`` and cursor stored for the run ``result_id`` (``(0, 0)`` for none).

    A run executed again (its worker was lost) numbers its new events after the old ones, so
    ``(run_id, seq)`` stays unique and clients keep the events as new; its first batch's ``prev``
    is the old attempt's last cursor.
    """
    model = swappable.event_model()
    top = model.objects.filter(result_id=result_id).aggregate(seq=Max("seq"), cursor=Max("pk"))
    return int(top["seq"] or 0), int(top["cursor"] or 0)


def _shift(event: Event, offset: int) -> Event:
    if not offset:
        return event
    return Event(kind=event.kind, run_id=event.run_id, seq=event.seq + offset, ts=event.ts, data=event.data)


def _persist(thread_id: Any, result_id: Any, events: list[Event]) -> list[dict[str, Any]]:
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

    def put(self, event: Event) -> None:
        """Buffer ``event`` (on the robot's loop); wake the pump when it starts a batch or makes one due."""
        with self._lock:
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

    def store(self, thread_id: Any, result_id: Any) -> tuple[list[dict[str, Any]], float]:
        """Drain the batch and store it (in the thread that writes the rows): its wire dicts, and when it left."""
        with self._lock:
            batch = self._buffer.drain()
        emitted = time.time()
        return (_persist(thread_id, result_id, batch) if batch else []), emitted

    def wait_and_store(self, thread_id: Any, result_id: Any) -> tuple[bool, list[dict[str, Any]], float]:
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


async def astream_run(thread_id: Any, result_id: Any, start: Starter[T], *,
                      on_event: Callable[[Event], Any] | None = None, layer: Any = None) -> T:
    """Run ``start(on_event)`` on the current loop, storing and publishing its events as they come.

    The rows are written through :func:`~robotlab_django.sync_bridge.blocking` (the sync caller's
    thread under :func:`stream_run`, which then also waits for each batch to be due), and each batch
    leaves the coalescer there.

    Args:
        thread_id: The thread's primary key (the group and the rows' thread).
        result_id: The run's ``RobotResult`` primary key.
        start: Given the event callback, returns the robot coroutine
            (``lambda cb: robot.arun(text, on_event=cb)``).
        on_event: Also receives every raw event (on the robot's loop).
        layer: The channel layer; defaults to :func:`~robotlab_django.broadcast.get_layer` (``None``: store only).

    Returns:
        What the coroutine returned; its exception is raised after the last batch went out.
    """
    layer = get_layer() if layer is None else layer
    offset, prev = await blocking(stored_position, result_id)
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
    except BaseException:
        task.cancel()
        raise
    if layer is not None:
        sweep_later(layer, message(thread_id, result_id, prev, [], time.time()))
    return await task


def stream_run(thread_id: Any, result_id: Any, start: Starter[T], *,
               on_event: Callable[[Event], Any] | None = None, layer: Any = None) -> T:
    """:func:`astream_run` from sync code: the robot on RobotLab's loop, the rows written in this thread."""
    return call_sync(astream_run, thread_id, result_id, start, on_event=on_event, layer=layer)


async def apublish_events(row: Any, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """Store and send ``events`` (``(kind, data)`` pairs) of ``row``'s run after its last stored event.

    For events no running robot sends: a failure before the robot ran, an answer to a parked run's
    question, the cancel of a run no worker holds.
    """
    offset, prev = await blocking(stored_position, row.pk)
    now = time.time()
    stored = [Event(kind=kind, run_id=row.run_id, seq=offset + index, ts=now, data=dict(data))
              for index, (kind, data) in enumerate(events, start=1)]
    payload = await blocking(_persist, row.thread_id, row.pk, stored)
    layer = get_layer()
    if layer is not None:
        await publish(layer, message(row.thread_id, row.pk, prev, payload, now))
        sweep_later(layer, message(row.thread_id, row.pk, last_cursor(payload, prev), [], now))


def publish_events(row: Any, events: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """:func:`apublish_events` from sync code."""
    call_sync(apublish_events, row, events)


async def apublish_failure(row: Any, error: str, error_type: str) -> None:
    """Store and send ``run.failed`` and ``stream.ended`` for a run that failed before its robot ran."""
    await apublish_events(row, [(RUN_FAILED, {"robot": row.robot_name, "error": error, "error_type": error_type}),
                                (STREAM_ENDED, {})])


def publish_failure(row: Any, error: str, error_type: str) -> None:
    """:func:`apublish_failure` from sync code."""
    call_sync(apublish_failure, row, error, error_type)
