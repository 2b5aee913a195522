"""Streaming a run's events: coalesced, stored as ``RunEvent`` rows for replay, sent to the thread's group.

:func:`stream_run` (sync) and :func:`astream_run` (async) run a robot coroutine and pump its
:class:`robotlab.streaming.Event`\\ s in the caller's thread (so the database writes use the
caller's connection and transaction). :class:`Coalescer` merges consecutive ``text.delta`` events
and says when a batch is due: ``ROBOTLAB["STREAM_FLUSH_INTERVAL"]`` seconds after its first event
(a timer, not the next token, flushes it), at ``ROBOTLAB["STREAM_FLUSH_DELTAS"]`` deltas, or at once
for any other event (``tool_call.started``, ``run.completed``, ...). Each batch is one
``bulk_create`` of ``RunEvent`` rows (one transaction, stored before it is sent, so a client that
saw an event can always replay it) and one channel-layer message::

    {"type": "robotlab.events", "thread": <thread pk>, "result": <RobotResult pk>, "prev": <cursor>,
     "t_emit": <Unix time>, "events": [<event>, ...]}

``t_emit`` is when the batch left the coalescer (before it was stored and sent): the receiver's
clock minus ``t_emit`` is the delivery latency, without the coalescing wait.

sent to the group :func:`thread_group` (``robotlab.thread.<pk>``). Each event is
``event.to_dict()`` (``kind``, ``run_id``, ``seq``, ``ts`` and the payload) plus ``cursor``: the
``RunEvent`` primary key, which grows with every stored event of the thread, across runs. A client
that reconnects asks for the events ``after`` its last cursor (see
:mod:`robotlab_django.consumers`). A merged delta keeps the ``ts`` of its first piece and the
``seq`` of its last, so per-run ``seq`` stays monotonic (with gaps). Publishing is at-most-once
(the channel layer may drop messages, a hung Redis times out after ``ROBOTLAB["STREAM_PUBLISH_TIMEOUT"]``
seconds); the stored rows are the source of truth. ``prev`` is the last cursor the run had stored before
this batch, so a consumer that did not get that far knows a message was lost and reads the gap from the
rows (see :class:`~robotlab_django.consumers.ThreadConsumer`). ``SWEEP_DELAY`` seconds after a run's
last batch one more message goes out with no events and the run's last cursor as ``prev``: the
sweep, which heals the loss of the last batch too.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from asgiref.sync import async_to_sync, sync_to_async
from django.db import InterfaceError, OperationalError, connection
from django.db.models import Max

from robotlab._runtime import get_loop
from robotlab.streaming import RUN_FAILED, STREAM_ENDED, TEXT_DELTA, Event, is_delta

from .conf import app_settings

__all__ = [
    "FLUSH_DELTAS",
    "FLUSH_INTERVAL",
    "MESSAGE_TYPE",
    "SWEEP_DELAY",
    "Coalescer",
    "astream_run",
    "get_layer",
    "persist_events",
    "publish_failure",
    "register_consumer_loop",
    "stored_position",
    "stream_run",
    "thread_group",
]

logger = logging.getLogger("robotlab_django")
T = TypeVar("T")

#: Seconds a batch waits for more deltas after its first event (``ROBOTLAB["STREAM_FLUSH_INTERVAL"]``).
FLUSH_INTERVAL = 0.05
#: Deltas that make a batch due before ``FLUSH_INTERVAL`` (``ROBOTLAB["STREAM_FLUSH_DELTAS"]``).
FLUSH_DELTAS = 20
#: The ``type`` of the channel-layer messages (handled by ``ThreadConsumer.robotlab_events``).
MESSAGE_TYPE = "robotlab.events"
#: Tries at storing a batch when the database answers with a transient error (a SQLite lock past its
#: busy timeout, a dropped connection), and the first wait between them, doubled each time.
STORE_ATTEMPTS = 3
STORE_BACKOFF = 0.1
#: Seconds after a run's last batch that its sweep goes out: a message with no events and the run's
#: last cursor as ``prev``, so a consumer whose copy of the last batch was lost still gets it.
SWEEP_DELAY = 1.0

Starter = Callable[[Callable[[Event], None]], Awaitable[T]]


def thread_group(thread_id: Any) -> str:
    """The channel-layer group of a thread's live events: ``robotlab.thread.<pk>``."""
    return f"robotlab.thread.{thread_id}"


def get_layer() -> Any:
    """The default channel layer, or ``None`` when ``CHANNEL_LAYERS`` configures none."""
    from channels.layers import get_channel_layer

    return get_channel_layer()


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
        """Buffer ``event``; a ``text.delta`` right after another one of the same run (and, in a network's
        run, of the same task) joins it."""
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
    model = app_settings.event_model()
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
    model = app_settings.event_model()
    top = model.objects.filter(result_id=result_id).aggregate(seq=Max("seq"), cursor=Max("pk"))
    return int(top["seq"] or 0), int(top["cursor"] or 0)


def _shift(event: Event, offset: int) -> Event:
    if not offset:
        return event
    return Event(kind=event.kind, run_id=event.run_id, seq=event.seq + offset, ts=event.ts, data=event.data)


def publish_failure(row: Any, error: str, error_type: str) -> None:
    """Store and send ``run.failed`` and ``stream.ended`` for a run that failed before its robot ran."""
    offset, prev = stored_position(row.pk)
    events = [Event(kind=RUN_FAILED, run_id=row.run_id, seq=offset + 1, ts=time.time(),
                    data={"robot": row.robot_name, "error": error, "error_type": error_type}),
              Event(kind=STREAM_ENDED, run_id=row.run_id, seq=offset + 2, ts=time.time())]
    emitted = time.time()
    payload = _persist(row.thread_id, row.pk, events)
    publisher = _Publisher.of(get_layer())
    if publisher is not None:
        publisher.send(_message(row.thread_id, row.pk, prev, payload, emitted))
        publisher.sweep(_message(row.thread_id, row.pk, _last_cursor(payload, prev), [], emitted))


def _message(thread_id: Any, result_id: Any, prev: int, payload: list[dict[str, Any]],
             emitted: float) -> dict[str, Any]:
    return {"type": MESSAGE_TYPE, "thread": thread_id, "result": result_id, "prev": prev, "t_emit": emitted,
            "events": payload}


def _last_cursor(payload: list[dict[str, Any]], prev: int) -> int:
    """The cursor a consumer has reached after ``payload`` (``prev`` when nothing in it was stored)."""
    return max([prev, *(event["cursor"] for event in payload if isinstance(event.get("cursor"), int))])


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


def stream_run(thread_id: Any, result_id: Any, start: Starter[T], *,
               on_event: Callable[[Event], Any] | None = None, layer: Any = None) -> T:
    """Run ``start(on_event)`` on RobotLab's loop, storing and publishing its events from this thread.

    Args:
        thread_id: The thread's primary key (the group and the rows' thread).
        result_id: The run's ``RobotResult`` primary key.
        start: Given the event callback, returns the robot coroutine
            (``lambda cb: robot.arun(text, on_event=cb)``).
        on_event: Also receives every raw event (on the robot's loop).
        layer: The channel layer; defaults to :func:`get_layer` (``None``: store only).

    Returns:
        What the coroutine returned; its exception is raised after the last batch went out.
    """
    layer = get_layer() if layer is None else layer
    offset, prev = stored_position(result_id)
    inbox = _Inbox(Coalescer.from_settings(), offset)
    future = asyncio.run_coroutine_threadsafe(_run(start, _tee(inbox.put, on_event)), get_loop())
    future.add_done_callback(lambda _: inbox.close())
    publisher, done = _Publisher.of(layer), False
    try:
        while not done:
            batch, done = inbox.take()
            if batch:
                emitted = time.time()
                payload = _persist(thread_id, result_id, batch)
                if publisher is not None:
                    publisher.send(_message(thread_id, result_id, prev, payload, emitted))
                prev = _last_cursor(payload, prev)
    except BaseException:
        future.cancel()
        raise
    if publisher is not None:
        publisher.sweep(_message(thread_id, result_id, prev, [], time.time()))
    return future.result()


class _Inbox:
    """A run's coalescer filled from the robot's loop and emptied by the flushing thread.

    The thread sleeps until a batch is due (its first event starts the timer) instead of waking
    for every token: with many concurrent runs in one worker, per-token wake-ups of as many threads
    fight over the GIL and delay every flush.
    """

    def __init__(self, buffer: Coalescer, offset: int) -> None:
        self._buffer = buffer
        self._offset = offset
        self._ready = threading.Condition()
        self._closed = False

    def put(self, event: Event) -> None:
        """Buffer ``event``; wake the thread when it starts a batch or makes one due."""
        with self._ready:
            first = self._buffer.time_left() is None
            self._buffer.add(_shift(event, self._offset))
            if first or self._buffer.is_due:
                self._ready.notify()

    def close(self) -> None:
        """No more events: the next :meth:`take` returns what is left."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def take(self) -> tuple[list[Event], bool]:
        """Block until a batch is due or the run ended: ``(events, ended)``."""
        with self._ready:
            while True:
                left = self._buffer.time_left()
                if self._closed or left == 0.0:
                    return self._buffer.drain(), self._closed
                self._ready.wait(left)


_consumer_loop: asyncio.AbstractEventLoop | None = None


def register_consumer_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the event loop this process's websocket consumers run on (``ThreadConsumer`` calls it).

    The in-memory layer's queues belong to that loop: a sync caller in another thread (the
    ``thread`` executor) publishes on it, so the consumer wakes at once instead of at its loop's
    next unrelated event.
    """
    global _consumer_loop
    _consumer_loop = loop


def _memory_loop() -> asyncio.AbstractEventLoop | None:
    """The registered consumer loop when a sync caller here may block on it (running, not our own)."""
    loop = _consumer_loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return None
    try:
        current = asyncio.get_running_loop()
    except RuntimeError:
        current = None
    return None if current is loop else loop


def _publish_timeout() -> float:
    return float(app_settings.STREAM_PUBLISH_TIMEOUT)


async def _send(layer: Any, message: dict[str, Any]) -> None:
    """``group_send`` ``message`` to its thread's group; a failure, or a send still pending after
    ``ROBOTLAB["STREAM_PUBLISH_TIMEOUT"]`` seconds (a hung Redis, then cancelled), is logged, not raised:
    the layer is at-most-once anyway, and the rows, ``prev`` and the sweep cover the gap."""
    try:
        await asyncio.wait_for(layer.group_send(thread_group(message["thread"]), message), _publish_timeout())
    except Exception:
        logger.exception("robotlab: could not publish events of thread %s", message["thread"])


_sweeps: set[asyncio.Task[None]] = set()


def _start_sweep(layer: Any, message: dict[str, Any]) -> None:
    task = asyncio.ensure_future(_send(layer, message))
    _sweeps.add(task)
    task.add_done_callback(_sweeps.discard)


class _Publisher:
    """Sends a sync caller's batches on the loop the layer belongs to.

    The in-memory layer publishes on the consumers' loop when one is registered
    (:func:`register_consumer_loop`), else on the caller's; any other layer on RobotLab's loop, so
    one connection pool serves every flush (a new loop per call would open a new Redis connection
    each time: ~10 ms instead of ~1 ms).
    """

    def __init__(self, layer: Any, loop: asyncio.AbstractEventLoop | None) -> None:
        self.layer, self.loop = layer, loop

    @classmethod
    def of(cls, layer: Any) -> _Publisher | None:
        """The publisher for ``layer``; ``None`` for no layer."""
        if layer is None:
            return None
        from channels.layers import InMemoryChannelLayer

        return cls(layer, _memory_loop() if isinstance(layer, InMemoryChannelLayer) else get_loop())

    def send(self, message: dict[str, Any]) -> None:
        """Send ``message`` now, waiting at most about ``STREAM_PUBLISH_TIMEOUT`` seconds."""
        if self.loop is None:
            async_to_sync(_send)(self.layer, message)
            return
        future = asyncio.run_coroutine_threadsafe(_send(self.layer, message), self.loop)
        try:
            future.result(_publish_timeout() + 1.0)
        except Exception:  # the loop itself is stuck
            future.cancel()
            logger.exception("robotlab: could not publish events of thread %s", message["thread"])

    def sweep(self, message: dict[str, Any]) -> None:
        """Send ``message`` (a run's last ``prev``, no events) ``SWEEP_DELAY`` seconds from now, without waiting."""
        if self.loop is None:
            return
        try:
            self.loop.call_soon_threadsafe(self.loop.call_later, SWEEP_DELAY, _start_sweep, self.layer, message)
        except RuntimeError:  # the loop closed since (the consumers' loop of a finished test, say): no sweep
            logger.debug("robotlab: no sweep for thread %s: its loop is closed", message["thread"])


async def _run(start: Starter[T], on_event: Callable[[Event], None]) -> T:
    return await start(on_event)


async def astream_run(thread_id: Any, result_id: Any, start: Starter[T], *,
                      on_event: Callable[[Event], Any] | None = None, layer: Any = None) -> T:
    """The async :func:`stream_run`: the robot runs on the current loop; rows are written in a thread."""
    layer = get_layer() if layer is None else layer
    offset, prev = await sync_to_async(stored_position)(result_id)
    events: asyncio.Queue[Event | None] = asyncio.Queue()
    task = asyncio.ensure_future(_run(start, _tee(events.put_nowait, on_event)))
    task.add_done_callback(lambda _: events.put_nowait(None))
    buffer, done = Coalescer.from_settings(), False
    try:
        while not done:
            try:
                item = await asyncio.wait_for(events.get(), buffer.time_left())
            except TimeoutError:
                item = None
            else:
                done = item is None
            if item is not None:
                buffer.add(_shift(item, offset))
            if len(buffer) and (done or buffer.is_due):
                batch, emitted = buffer.drain(), time.time()
                payload = await sync_to_async(_persist)(thread_id, result_id, batch)
                if layer is not None:
                    await _send(layer, _message(thread_id, result_id, prev, payload, emitted))
                prev = _last_cursor(payload, prev)
    except BaseException:
        task.cancel()
        raise
    if layer is not None:
        asyncio.get_running_loop().call_later(SWEEP_DELAY, _start_sweep, layer,
                                              _message(thread_id, result_id, prev, [], time.time()))
    return await task
