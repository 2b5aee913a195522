"""Streaming: the events a run emits, and the chunks ``on_content`` receives.

Every :class:`Event` has a ``kind`` (RobotLab's ``Streaming::Events`` names), the ``run_id``,
a ``seq`` that grows by one per event of a run, a ``ts`` (Unix seconds) and a ``data``
payload. ``event.to_dict()`` is the JSON that crosses process boundaries and websockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, NamedTuple, get_args

from ._record import Record

__all__ = [
    "ALL_EVENTS",
    "DELTA_EVENTS",
    "LIFECYCLE_EVENTS",
    "Chunk",
    "DeltaKind",
    "Event",
    "EventEmitter",
    "EventKind",
    "LifecycleKind",
    "SequenceCounter",
    "current_emitter",
    "emitting",
    "is_delta",
    "is_lifecycle",
    "is_valid",
    "run_publisher",
]

#: Lifecycle events (RobotLab ``LIFECYCLE_EVENTS`` plus the tool-call pair this port emits).
LifecycleKind = Literal[
    "run.started",
    "run.completed",
    "run.failed",
    "run.interrupted",
    "step.started",
    "step.completed",
    "step.failed",
    "part.created",
    "part.completed",
    "part.failed",
    "tool_call.started",
    "tool_call.completed",
]
#: Delta events, which carry a piece of something growing.
DeltaKind = Literal[
    "text.delta",
    "tool_call.arguments.delta",
    "tool_call.output.delta",
    "reasoning.delta",
    "data.delta",
]
#: Every event kind: the value of :attr:`Event.kind`, which tells events apart.
EventKind = Literal[
    LifecycleKind,
    DeltaKind,
    "hitl.requested",
    "hitl.resolved",
    "usage.updated",
    "metadata.updated",
    "stream.ended",
]

RUN_STARTED: Final = "run.started"
RUN_COMPLETED: Final = "run.completed"
RUN_FAILED: Final = "run.failed"
TEXT_DELTA: Final = "text.delta"
TOOL_CALL_STARTED: Final = "tool_call.started"
TOOL_CALL_COMPLETED: Final = "tool_call.completed"
USAGE_UPDATED: Final = "usage.updated"
HITL_REQUESTED: Final = "hitl.requested"
HITL_RESOLVED: Final = "hitl.resolved"
STEP_STARTED: Final = "step.started"
STEP_COMPLETED: Final = "step.completed"
STEP_FAILED: Final = "step.failed"
STREAM_ENDED: Final = "stream.ended"

#: Lifecycle events, as a tuple.
LIFECYCLE_EVENTS: tuple[str, ...] = get_args(LifecycleKind)
#: Delta events, as a tuple.
DELTA_EVENTS: tuple[str, ...] = get_args(DeltaKind)
#: Every event kind, as a tuple.
ALL_EVENTS: tuple[str, ...] = get_args(EventKind)


def is_lifecycle(kind: str) -> bool:
    """Whether ``kind`` is a lifecycle event."""
    return kind in LIFECYCLE_EVENTS


def is_delta(kind: str) -> bool:
    """Whether ``kind`` is a delta event."""
    return kind in DELTA_EVENTS


def is_valid(kind: str) -> bool:
    """Whether ``kind`` is a known event kind."""
    return kind in ALL_EVENTS


class SequenceCounter:
    """A thread-safe monotonic counter."""

    def __init__(self, start: int = 0) -> None:
        self._value = start
        self._lock = threading.Lock()

    def next(self) -> int:
        """Increment and return the new value."""
        with self._lock:
            self._value += 1
            return self._value

    @property
    def current(self) -> int:
        """The value, without incrementing."""
        return self._value

    def reset(self, value: int = 0) -> int:
        """Set the counter to ``value``."""
        with self._lock:
            self._value = value
            return value


@dataclass(frozen=True, slots=True)
class Event(Record):
    """One streaming event of a run, told apart by its ``kind``.

    ``to_dict()`` is ``{"kind", "run_id", "seq", "ts", **data}``, the JSON sent over the wire, and
    ``Event.from_dict`` reads it back (the keys other than the first four are the ``data``).
    ``kind`` is one of :data:`EventKind`, or a kind an extension adds: it is typed
    ``EventKind | str`` (so code passing a plain string type-checks) and not checked at run time;
    :func:`is_valid` tells the known ones.

    Events are created once per streamed token, so this is a frozen slotted dataclass, not a
    pydantic model. Measured on the 2-core development machine (CPU time, best of 7 rounds of
    100,000, main and this module interleaved in one process): creating an event takes about
    1.0 us, as before this module moved to the shared serializer, against 1.5-2.0 us for a frozen
    pydantic model of the same fields; ``to_dict()`` takes about 0.9 us (0.16 us when it was
    written out by hand), and it runs once per coalesced batch, not per token.
    """

    _wire: ClassVar[tuple[str, ...]] = ("kind", "run_id", "seq", "ts")
    _spread: ClassVar[str | None] = "data"

    kind: EventKind | str
    run_id: str
    seq: int
    ts: float
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Chunk(Record):
    """A piece of streamed model text, as given to ``on_content`` callbacks."""

    _wire: ClassVar[tuple[str, ...]] = ("content", "thinking")

    content: str
    thinking: str | None = None

    def __str__(self) -> str:
        return self.content


class EventEmitter:
    """Builds a run's events with a shared ``seq`` and hands each one to a sink."""

    def __init__(self, sink: Any, run_id: str | None = None, counter: SequenceCounter | None = None) -> None:
        self.sink = sink
        self.run_id = run_id or uuid.uuid4().hex
        self.counter = counter or SequenceCounter()
        self._clock = itertools.count()

    def emit(self, kind: str, **data: Any) -> Event:
        """Create the next event and pass it to the sink."""
        event = Event(kind=kind, run_id=self.run_id, seq=self.counter.next(), ts=time.time(), data=data)
        self.sink(event)
        return event


class _RunStream(NamedTuple):
    emitter: EventEmitter
    loop: asyncio.AbstractEventLoop | None
    thread: int


_current: contextvars.ContextVar[_RunStream | None] = contextvars.ContextVar("robotlab_run_stream", default=None)


@contextlib.contextmanager
def emitting(emitter: EventEmitter | None) -> Iterator[None]:
    """Make ``emitter`` the event stream of the run in progress for the block and the tasks it starts.

    ``Robot.arun`` sets it around the model conversation, so code running inside (a tool such as
    :class:`~robotlab.tools.AskUser` and its channel) can add events to the run's ``on_event`` stream.
    ``None`` (a run nobody listens to) hides an outer run's stream.
    """
    try:
        loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    token = _current.set(None if emitter is None else _RunStream(emitter, loop, threading.get_ident()))
    try:
        yield
    finally:
        _current.reset(token)


def current_emitter() -> EventEmitter | None:
    """The emitter set by the innermost :func:`emitting`, else ``None``."""
    stream = _current.get()
    return None if stream is None else stream.emitter


def run_publisher() -> Callable[[str, dict[str, Any]], None] | None:
    """A ``publish(kind, payload)`` that adds an event to the current run's stream, or ``None`` outside one.

    It may be called from any thread: off the run's own thread the event is handed to the run's event
    loop (``call_soon_threadsafe``), so the run's ``on_event`` callback always runs where the run does.
    """
    stream = _current.get()
    if stream is None:
        return None
    emitter, loop, owner = stream

    def publish(kind: str, payload: dict[str, Any]) -> None:
        if loop is None or threading.get_ident() == owner:
            emitter.emit(kind, **payload)
            return
        try:
            loop.call_soon_threadsafe(functools.partial(emitter.emit, kind, **payload))
        except RuntimeError:  # the loop is closed: the run is over
            pass

    return publish
