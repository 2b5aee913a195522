from __future__ import annotations

import asyncio
import threading

from robotlab.streaming import (
    ALL_EVENTS,
    Event,
    EventEmitter,
    SequenceCounter,
    current_emitter,
    emitting,
    is_delta,
    is_lifecycle,
    is_valid,
    run_publisher,
)


def test_sequence_counter_is_thread_safe() -> None:
    counter = SequenceCounter()
    threads = [threading.Thread(target=lambda: [counter.next() for _ in range(1000)]) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the thread did not finish within 60 s"
    assert counter.current == 4000
    assert counter.reset(5) == 5
    assert counter.next() == 6


def test_event_kinds() -> None:
    for kind in ("run.started", "text.delta", "tool_call.started", "tool_call.completed", "usage.updated",
                 "hitl.requested", "hitl.resolved", "run.completed", "run.failed", "stream.ended"):
        assert is_valid(kind)
    assert is_delta("text.delta") and not is_lifecycle("text.delta")
    assert is_lifecycle("run.started")
    assert not is_valid("nope")
    assert len(set(ALL_EVENTS)) == len(ALL_EVENTS)


def test_emitter_numbers_events_and_to_dict_flattens() -> None:
    seen: list[Event] = []
    emitter = EventEmitter(seen.append, run_id="r1")
    emitter.emit("run.started", robot="x")
    emitter.emit("text.delta", text="hi")
    assert [e.seq for e in seen] == [1, 2]
    assert seen[1].to_dict() == {"kind": "text.delta", "run_id": "r1", "seq": 2, "ts": seen[1].ts, "text": "hi"}


async def test_run_publisher_adds_events_to_the_current_run_from_any_thread() -> None:
    assert run_publisher() is None and current_emitter() is None
    seen: list[tuple[str, int]] = []
    emitter = EventEmitter(lambda e: seen.append((e.kind, threading.get_ident())), run_id="r1")
    with emitting(emitter):
        assert current_emitter() is emitter
        publish = run_publisher()
        assert publish is not None
        publish("hitl.requested", {"request_id": "q1"})
        arrived = asyncio.Event()
        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=lambda: (publish("hitl.resolved", {"request_id": "q1"}),
                                                  loop.call_soon_threadsafe(arrived.set)))
        thread.start()
        await asyncio.wait_for(arrived.wait(), timeout=5)
        thread.join(5)
        with emitting(None):  # a run nobody listens to hides the outer stream
            assert run_publisher() is None
    assert run_publisher() is None
    here = threading.get_ident()
    assert seen == [("hitl.requested", here), ("hitl.resolved", here)]  # both on the run's own thread


def test_event_kinds_come_from_one_literal() -> None:
    from typing import get_args

    from robotlab.streaming import DELTA_EVENTS, LIFECYCLE_EVENTS, EventKind

    assert get_args(EventKind) == ALL_EVENTS
    assert set(LIFECYCLE_EVENTS) | set(DELTA_EVENTS) < set(ALL_EVENTS)
    assert ALL_EVENTS[-1] == "stream.ended" and "text.delta" in DELTA_EVENTS


def test_event_round_trips_through_its_dict_and_json() -> None:
    import json

    event = Event(kind="tool_call.completed", run_id="r1", seq=3, ts=12.5, data={"name": "lookup", "result": [1]})
    assert event.to_dict() == {"kind": "tool_call.completed", "run_id": "r1", "seq": 3, "ts": 12.5, "name": "lookup",
                               "result": [1]}
    assert event.to_json() == (
        '{"kind":"tool_call.completed","run_id":"r1","seq":3,"ts":12.5,"name":"lookup","result":[1]}'
    )
    assert Event.from_dict(event.to_dict()) == event
    assert Event.from_dict(json.loads(event.to_json())) == event
    assert Event.from_dict({"kind": "stream.ended", "run_id": "r", "seq": 1, "ts": 0.0}).data == {}


def test_chunk_serializes_like_every_record() -> None:
    from robotlab.streaming import Chunk

    chunk = Chunk(content="Hel", thinking="hmm")
    assert (str(chunk), chunk.to_dict(), Chunk.from_dict(chunk.to_dict())) == (
        "Hel", {"content": "Hel", "thinking": "hmm"}, chunk)
