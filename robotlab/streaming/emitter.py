"""Emitting a run's events: the shared counter, the emitter, and the stream of the run in progress.

:class:`EventEmitter` numbers a run's events with a :class:`SequenceCounter` and hands each to a sink;
:func:`emitting` makes it the stream of the run in progress, so code running inside (a tool and its channel) can
add events with :func:`run_publisher`. :func:`failure_data` is what a failure event says of its error.
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
from typing import Any, NamedTuple, NotRequired, TypedDict

from ..errors import InferenceError, ProviderErrorKind
from .events import Event

__all__ = ["EventEmitter", "FailureData", "SequenceCounter", "current_emitter", "emitting", "failure_data",
           "run_publisher"]


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


class EventEmitter:
    """Builds a run's events with a shared ``seq`` and hands each one to a sink."""

    def __init__(self, sink: Callable[[Event], object], run_id: str | None = None,
                 counter: SequenceCounter | None = None) -> None:
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


class FailureData(TypedDict):
    """What a failure event (``run.failed``, ``step.failed``) says of its error: :func:`failure_data`."""

    error: str
    """The error's message (``str(error)``)."""
    error_type: str
    """The error's class name."""
    error_kind: NotRequired[ProviderErrorKind]
    """The kind of a provider failure (:attr:`~robotlab.errors.InferenceError.kind`); absent for other errors."""


def failure_data(error: BaseException) -> FailureData:
    """The fields a failure event carries for ``error``: its message, its class name and its provider kind."""
    data: FailureData = {"error": str(error), "error_type": type(error).__name__}
    kind = error.kind if isinstance(error, InferenceError) else None
    if kind is not None:
        data["error_kind"] = kind
    return data
