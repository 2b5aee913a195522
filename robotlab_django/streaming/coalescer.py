"""Coalescing a run's events: consecutive ``text.delta`` events merged, and when a batch is due.

A batch is due ``ROBOTLAB["STREAM_FLUSH_INTERVAL"]`` seconds after its first event (a timer, not the next token,
flushes it), at ``ROBOTLAB["STREAM_FLUSH_DELTAS"]`` deltas, or at once for any other event
(``tool_call.started``, ``run.completed``, ...) but ``usage.updated``, which waits with the deltas it follows (the
event after a model call's reply ends the batch: one write where there were two). A merged delta keeps the ``ts``
of its first piece and the ``seq`` of its last, so per-run ``seq`` stays monotonic (with gaps). The event pump
(:func:`robotlab_django.streaming.event_stream.astream_run`) drains each batch to store and send it.

:data:`COALESCING` says what the coalescer does with every kind (a kind no table names makes its batch due).
"""

from __future__ import annotations

import time
from enum import Enum
from typing import assert_never

from robotlab.streaming import TEXT_DELTA, Event, EventKind, Handled, Handling, handling_table
from robotlab_django.conf import app_settings

__all__ = ["COALESCING", "FLUSH_DELTAS", "FLUSH_INTERVAL", "Coalescer", "Coalescing"]

#: Seconds a batch waits for more deltas after its first event (``ROBOTLAB["STREAM_FLUSH_INTERVAL"]``).
FLUSH_INTERVAL = 0.05
#: Deltas that make a batch due before ``FLUSH_INTERVAL`` (``ROBOTLAB["STREAM_FLUSH_DELTAS"]``).
FLUSH_DELTAS = 20


class Coalescing(Enum):
    """What the coalescer does with a kind."""

    MERGE = "merge"
    """Joins the previous event when it is of the same kind, run and task; counts as a delta."""
    DELTA = "delta"
    """Counts as a delta: its batch waits for more (until the interval or the delta limit)."""
    FLUSH = "flush"
    """Makes its batch due at once."""


def _coalescing(kind: EventKind) -> Handling[Coalescing]:
    match kind:
        case "text.delta":
            return Handled(Coalescing.MERGE, "merged with the text.delta before it (same run and task)")
        case "tool_call.arguments.delta" | "tool_call.output.delta" | "reasoning.delta" | "data.delta":
            return Handled(Coalescing.DELTA, "a delta: waits for its batch, not merged (no robot emits it yet)")
        case "usage.updated":
            return Handled(Coalescing.DELTA, "waits for its batch: it follows a model call's last delta, and what "
                                             "comes next (step.completed, tool_call.started) or the interval sends it")
        case ("run.started" | "run.completed" | "run.failed" | "run.interrupted" | "run.cancelled" | "step.started"
              | "step.completed" | "step.failed" | "part.created" | "part.completed" | "part.failed"
              | "tool_call.started" | "tool_call.completed" | "hitl.requested" | "hitl.resolved"
              | "metadata.updated" | "stream.ended"):
            return Handled(Coalescing.FLUSH, "sent at once with the batch it ends")
        case _:
            assert_never(kind)


#: What the coalescer does with each kind.
COALESCING: dict[str, Handling[Coalescing]] = handling_table("coalescer", _coalescing)
_POLICY: dict[str, Coalescing] = {kind: handling.action for kind, handling in COALESCING.items()
                                  if isinstance(handling, Handled)}
_MERGE, _FLUSH = Coalescing.MERGE, Coalescing.FLUSH


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
        policy = _POLICY.get(event.kind, _FLUSH)
        last = self._events[-1] if self._events else None
        if (policy is _MERGE and last is not None and last.kind == event.kind and last.run_id == event.run_id
                and last.data.get("task") == event.data.get("task")):
            joined = f"{last.data.get('text', '')}{event.data.get('text', '')}"
            merged = {**last.data, **event.data, "text": joined}
            self._events[-1] = Event(kind=TEXT_DELTA, run_id=event.run_id, seq=event.seq, ts=last.ts,
                                     data=merged)
        else:
            self._events.append(event)
        if policy is _FLUSH:
            self._urgent = True
        else:
            self._deltas += 1

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
