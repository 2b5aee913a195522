"""The coalescer: text deltas merged, and a batch due at the delta limit, after the interval or at any other event."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab.streaming import Event
from robotlab_django.streaming.coalescer import FLUSH_DELTAS, Coalescer


def _delta(seq: int, piece: str, run_id: str = "r1") -> Event:
    return Event(kind="text.delta", run_id=run_id, seq=seq, ts=float(seq), data={"text": piece})


def test_the_coalescer_merges_deltas_and_is_due_at_the_delta_limit() -> None:
    buffer = Coalescer(interval=60)
    assert buffer.time_left() is None
    for seq in range(1, FLUSH_DELTAS):
        buffer.add(_delta(seq, f"{seq} "))
    assert not buffer.is_due and len(buffer) == 1
    buffer.add(_delta(FLUSH_DELTAS, "end"))
    assert buffer.is_due
    (merged,) = buffer.drain()
    assert merged.data["text"] == "".join(f"{seq} " for seq in range(1, FLUSH_DELTAS)) + "end"
    assert (merged.seq, merged.ts) == (FLUSH_DELTAS, 1.0)  # the last seq, the first piece's time
    assert len(buffer) == 0 and buffer.time_left() is None


def test_other_events_are_due_at_once_and_keep_their_order() -> None:
    buffer = Coalescer(interval=60)
    buffer.add(_delta(1, "a"))
    assert buffer.time_left() == pytest.approx(60, abs=1)
    buffer.add(Event(kind="tool_call.started", run_id="r1", seq=2, ts=2.0, data={"name": "add"}))
    buffer.add(_delta(3, "b"))
    buffer.add(_delta(4, "c", run_id="r2"))  # another run's delta is not merged
    assert buffer.is_due
    assert [(event.kind, event.seq, event.data.get("text")) for event in buffer.drain()] == [
        ("text.delta", 1, "a"), ("tool_call.started", 2, None), ("text.delta", 3, "b"),
        ("text.delta", 4, "c")]


def test_a_usage_update_waits_with_the_deltas_it_follows_and_the_steps_end_sends_them_together() -> None:
    buffer = Coalescer(interval=60)
    buffer.add(_delta(1, "Done."))
    buffer.add(Event(kind="usage.updated", run_id="r1", seq=2, ts=2.0, data={"input_tokens": 8}))
    assert not buffer.is_due  # a model call's last delta and its usage: not a write of their own
    buffer.add(Event(kind="step.completed", run_id="r1", seq=3, ts=3.0, data={"reply": "Done."}))
    assert buffer.is_due
    assert [event.kind for event in buffer.drain()] == ["text.delta", "usage.updated", "step.completed"]


def test_a_batch_is_due_after_the_interval() -> None:
    buffer = Coalescer(interval=0.0)
    buffer.add(_delta(1, "a"))
    assert buffer.is_due


def test_the_flush_policy_comes_from_the_settings(settings: Any) -> None:
    assert (Coalescer.from_settings().interval, Coalescer.from_settings().max_deltas) == (0.05, FLUSH_DELTAS)
    settings.ROBOTLAB = {"STREAM_FLUSH_INTERVAL": 0.2, "STREAM_FLUSH_DELTAS": 3}
    buffer = Coalescer.from_settings()
    assert buffer.interval == 0.2
    for seq in range(1, 4):
        assert not buffer.is_due
        buffer.add(_delta(seq, "x"))
    assert buffer.is_due  # at 3 deltas, before the 0.2 s
