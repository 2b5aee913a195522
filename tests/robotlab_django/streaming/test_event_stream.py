"""Run events: coalesced, stored as RunEvent rows, sent to the thread's group."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import connections

from robotlab.llm.types import LLMRequest, LLMResponse
from robotlab.streaming import Event
from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.models import RunEvent
from robotlab_django.runs.sync_bridge import call_sync
from robotlab_django.streaming import broadcast, event_stream
from robotlab_django.streaming.broadcast import MESSAGE_TYPE, SWEEP_DELAY, thread_group
from robotlab_django.streaming.event_stream import persist_events
from tests.robotlab_django.faults import reachable
from tests.robotlab_django.settings import REDIS_PREFIX

LONG = " ".join(f"word{i}" for i in range(200))


def _delta(seq: int, piece: str, run_id: str = "r1") -> Event:
    return Event(kind="text.delta", run_id=run_id, seq=seq, ts=float(seq), data={"text": piece})


@pytest.mark.django_db
def test_a_run_stores_few_coalesced_events_that_rebuild_the_reply() -> None:
    seen: list[Event] = []
    row = services.run_robot("s1", "echo", "talk", llm=FakeLLM([text(LONG)]), on_event=seen.append)
    stored = list(RunEvent.objects.filter(thread_id=row.thread_id).order_by("pk"))
    raw_deltas = [event for event in seen if event.kind == "text.delta"]
    deltas = [event for event in stored if event.kind == "text.delta"]
    assert len(raw_deltas) == 200 and 0 < len(deltas) < len(raw_deltas) // 5
    assert "".join(event.data["text"] for event in deltas) == row.reply == LONG
    assert stored[0].kind == "run.started" and stored[-1].kind == "stream.ended"
    assert {event.run_id for event in stored} == {row.run_id} and {e.result_id for e in stored} == {row.pk}
    seqs = [event.seq for event in stored]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


@pytest.mark.django_db
def test_persisted_events_carry_a_growing_cursor() -> None:
    row = services.run_robot("s1", "echo", "hi", llm=FakeLLM([text("one")]))
    second = services.run_robot("s1", "echo", "again", llm=FakeLLM([text("two")]))
    events = [_delta(1, "x", run_id="r9")]
    (wire,) = persist_events(row.thread_id, second.pk, events)
    stored = RunEvent.objects.filter(thread_id=row.thread_id).order_by("pk")
    cursors = list(stored.values_list("pk", flat=True))
    assert wire == {"kind": "text.delta", "run_id": "r9", "seq": 1, "ts": 1.0, "text": "x",
                    "cursor": cursors[-1]}
    assert cursors == sorted(cursors) and len(cursors) > 2


@pytest.mark.django_db
def test_a_sync_run_reaches_the_threads_group() -> None:
    layer = get_channel_layer()
    thread = services.get_thread("s-live")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(thread_group(thread.pk), channel)
    row = services.run_robot(thread, "echo", "talk", llm=FakeLLM([text(LONG)]))
    messages = async_to_sync(_drain)(layer, channel)
    assert {message["type"] for message in messages} == {MESSAGE_TYPE}
    events = [event for message in messages for event in message["events"]]
    assert [event["cursor"] for event in events] == list(
        RunEvent.objects.filter(thread_id=thread.pk).order_by("pk").values_list("pk", flat=True))
    assert "".join(event["text"] for event in events if event["kind"] == "text.delta") == row.reply
    assert len(messages) < 20  # not one channel message per token
    for message in messages:  # stamped when the batch left the coalescer, after its events happened
        assert message["t_emit"] >= max(event["ts"] for event in message["events"])
    # each batch names the last cursor of the batch before it, so a consumer can tell one was lost
    assert {message["result"] for message in messages} == {row.pk}
    assert [message["prev"] for message in messages] == [0] + [
        message["events"][-1]["cursor"] for message in messages[:-1]]


async def _until_sweep(layer: Any, channel: str) -> list[dict[str, Any]]:
    """The messages of ``channel`` through the first with no events (a sweep), and any within 0.3 s after it."""
    messages = [await asyncio.wait_for(layer.receive(channel), SWEEP_DELAY + 5)]
    while messages[-1]["events"]:
        messages.append(await asyncio.wait_for(layer.receive(channel), SWEEP_DELAY + 5))
    return messages + await _drain(layer, channel, 0.3)


def _assert_swept(messages: list[dict[str, Any]], row: Any) -> None:
    last = RunEvent.objects.filter(result=row).order_by("pk").last()
    assert last is not None
    assert messages[-1]["events"] == [] and messages[-1]["prev"] == last.pk and messages[-1]["result"] == row.pk
    assert [message for message in messages if not message["events"]] == messages[-1:]  # one sweep


@pytest.mark.django_db(transaction=True)
async def test_an_async_run_ends_with_a_sweep_naming_its_last_cursor() -> None:
    layer = get_channel_layer()
    try:
        thread = await sync_to_async(services.get_thread)("s-sweep")
        channel = await layer.new_channel()
        await layer.group_add(thread_group(thread.pk), channel)
        row = await services.arun_robot(thread, "echo", "talk", llm=FakeLLM([text("swept")]))
        await sync_to_async(_assert_swept)(await _until_sweep(layer, channel), row)
    finally:
        await sync_to_async(connections.close_all)()


@pytest.mark.django_db(transaction=True)
def test_a_worker_run_on_redis_ends_with_a_sweep_too() -> None:
    from channels_redis.pubsub import RedisPubSubChannelLayer

    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached (scripts/services starts it)")
    layer = RedisPubSubChannelLayer(hosts=["redis://127.0.0.1:6379/13"], prefix=f"{REDIS_PREFIX}:asgi")
    thread = services.get_thread("s-sweep-redis")
    row = services.start_run(thread, "echo", "talk")

    async def watch() -> list[dict[str, Any]]:
        channel = await layer.new_channel()
        await layer.group_add(thread_group(thread.pk), channel)
        robot = services.build_robot("echo", llm=FakeLLM([text("swept on redis")]))
        await asyncio.to_thread(event_stream.stream_run, thread.pk, row.pk,
                                lambda on_event: robot.arun("talk", on_event=on_event), layer=layer)
        messages = await _until_sweep(layer, channel)
        await layer.flush()
        return messages

    _assert_swept(async_to_sync(watch)(), row)


async def _drain(layer: Any, channel: str, quiet: float = 0.2) -> list[dict[str, Any]]:
    """The messages of ``channel`` until none came for ``quiet`` seconds."""
    messages = []
    while True:
        try:
            messages.append(await asyncio.wait_for(layer.receive(channel), quiet))
        except TimeoutError:
            return messages


@pytest.mark.django_db(transaction=True)
async def test_an_async_run_streams_too() -> None:
    layer = get_channel_layer()
    try:
        thread = await sync_to_async(services.get_thread)("s-async")
        channel = await layer.new_channel()
        await layer.group_add(thread_group(thread.pk), channel)
        row = await services.arun_robot(thread, "echo", "talk", llm=FakeLLM([text("async words here")]))
        events = [event for message in await _drain(layer, channel) for event in message["events"]]
        assert events[0]["kind"] == "run.started" and events[-1]["kind"] == "stream.ended"
        assert "".join(event["text"] for event in events if event["kind"] == "text.delta") == row.reply
        assert await RunEvent.objects.filter(thread_id=thread.pk).acount() == len(events)
    finally:
        await sync_to_async(connections.close_all)()


class _BrokenLayer:
    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        raise ConnectionError("layer down")


@pytest.mark.django_db
def test_a_batch_whose_store_hits_a_locked_database_is_stored_on_a_retry(monkeypatch: Any, caplog: Any) -> None:
    from django.db import OperationalError

    real, failures = event_stream.persist_events, iter([OperationalError("database is locked")])

    def locked_once(*args: Any) -> Any:
        error = next(failures, None)
        if error is not None:
            raise error
        return real(*args)

    monkeypatch.setattr(event_stream, "persist_events", locked_once)
    monkeypatch.setattr(event_stream, "STORE_BACKOFF", 0.0)
    row = services.run_robot("s1", "echo", "talk", llm=FakeLLM([text(LONG)]))
    stored = RunEvent.objects.filter(result=row).order_by("pk")
    assert "".join(event.data["text"] for event in stored if event.kind == "text.delta") == row.reply == LONG
    assert stored.first().kind == "run.started"  # the first batch, the one that failed once, is there
    assert "database is locked" in caplog.text and "retrying" in caplog.text


@pytest.mark.django_db
def test_a_store_that_keeps_failing_still_sends_the_batch_and_says_so(monkeypatch: Any, caplog: Any) -> None:
    from django.db import OperationalError

    def locked(*args: Any) -> Any:
        raise OperationalError("database is locked")

    layer = get_channel_layer()
    thread = services.get_thread("s-locked")
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(thread_group(thread.pk), channel)
    monkeypatch.setattr(event_stream, "persist_events", locked)
    monkeypatch.setattr(event_stream, "STORE_BACKOFF", 0.0)
    row = services.run_robot(thread, "echo", "talk", llm=FakeLLM([text("live only")]))
    events = [event for message in async_to_sync(_drain)(layer, channel) for event in message["events"]]
    assert "".join(event["text"] for event in events if event["kind"] == "text.delta") == row.reply == "live only"
    assert not RunEvent.objects.filter(result=row).exists()
    assert "could not store" in caplog.text and "OperationalError: database is locked" in caplog.text  # the cause


@pytest.mark.django_db
def test_a_broken_layer_does_not_fail_the_run(monkeypatch: Any) -> None:
    monkeypatch.setattr("robotlab_django.streaming.event_stream.get_layer", _BrokenLayer)
    row = services.run_robot("s1", "echo", "hi", llm=FakeLLM([text("still fine")]))
    assert row.reply == "still fine" and RunEvent.objects.filter(result=row).exists()


class _HungLayer:
    """A layer whose sends never finish, like channels-redis talking to a stopped Redis."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise


@pytest.mark.django_db
def test_a_hung_layer_costs_each_flush_the_publish_timeout_and_the_sends_are_cancelled(
        settings: Any, caplog: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "STREAM_PUBLISH_TIMEOUT": 0.05}
    layer = _HungLayer()
    thread = services.get_thread("s-hung")
    row = services.start_run(thread, "echo", "hi")
    robot = services.build_robot("echo", llm=FakeLLM([text("stored anyway")]))
    result = event_stream.stream_run(thread.pk, row.pk, lambda on_event: robot.arun("hi", on_event=on_event),
                                  layer=layer)
    assert result.reply == "stored anyway"
    assert "".join(event.data.get("text", "") for event in RunEvent.objects.filter(result=row)) == "stored anyway"
    assert layer.started >= 1 and layer.cancelled == layer.started  # none is left pending on RobotLab's loop
    assert "could not publish events" in caplog.text


@pytest.mark.django_db
def test_a_run_that_fails_before_its_robot_runs_still_tells_the_watchers(clean_registry: None) -> None:
    from robotlab.errors import ConfigurationError
    from robotlab_django.registry import registry

    def broken(**options: Any) -> Any:
        raise ConfigurationError("No model configured")

    registry.register(broken, name="broken")
    row = services.run_robot("s1", "broken", "hi", raise_errors=False)
    events = list(RunEvent.objects.filter(result=row).order_by("pk"))
    assert [(event.kind, event.seq) for event in events] == [("run.failed", 1), ("stream.ended", 2)]
    assert events[0].data == {"robot": "broken", "error": "No model configured",
                              "error_type": "ConfigurationError"}


@pytest.mark.django_db
def test_a_run_executed_again_numbers_its_events_after_the_old_ones() -> None:
    from robotlab_django.models import RobotResult, Status

    row = services.run_robot("s1", "echo", "hi", llm=FakeLLM([text("first try")]))
    first = list(RunEvent.objects.filter(result=row).values_list("seq", flat=True))
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RETRYING)  # its worker was lost
    services.execute_run(row.pk, llm=FakeLLM([text("second try")]))
    seqs = list(RunEvent.objects.filter(result=row).order_by("pk").values_list("seq", flat=True))
    assert seqs[:len(first)] == first and seqs == sorted(seqs) and len(set(seqs)) == len(seqs) > len(first)


@pytest.mark.django_db
def test_a_task_executed_again_numbers_its_events_after_the_old_ones_within_its_block() -> None:
    """A distributed task's events are numbered in its block (``n * SEQ_BLOCK``) before they reach the stream: its
    second execution goes on after its first one's, not past the block into the next task's."""
    row = services.run_robot("s1", "echo", "hi", llm=FakeLLM([text("first")]))
    block = 3 * event_stream.SEQ_BLOCK

    async def task(on_event: Any) -> None:
        for seq in (1, 2):
            on_event(Event(kind="step.started", run_id="turn", seq=block + seq, ts=0.0, data={}))

    RunEvent.objects.filter(result=row).delete()  # a task row: only its task's events
    for first in (True, False):  # its first execution, then its second
        async_to_sync(event_stream.astream_run)(row.thread_id, row.pk, task, first=first, block=block)
    seqs = list(RunEvent.objects.filter(result=row).order_by("pk").values_list("seq", flat=True))
    assert seqs == [block + 1, block + 2, block + 3, block + 4]


@pytest.mark.django_db
def test_a_batch_is_one_insert_without_a_transaction_of_its_own() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    row = services.run_robot("s1", "echo", "hi", llm=FakeLLM([text("one")]))
    with CaptureQueriesContext(connection) as queries:
        wires = persist_events(row.thread_id, row.pk, [_delta(1, "x", run_id="r9"), _delta(2, "y", run_id="r9")])
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["INSERT"]
    assert [wire["cursor"] for wire in wires] == list(
        RunEvent.objects.filter(run_id="r9").order_by("pk").values_list("pk", flat=True))


async def test_a_cancel_that_comes_as_a_publish_completes_is_not_lost() -> None:
    """A run cancelled just as its batch reached the layer stops at its next await.

    Python 3.11's ``asyncio.wait_for`` returns the result instead when its inner send finishes in the same step
    as the cancel, and the run streamed on for seconds after a user cancelled it (the flaky cancel test).
    """
    class Layer:  # the send completes in the very step the run is cancelled
        async def group_send(self, group: str, message: dict[str, Any]) -> None:
            run.cancel()

    async def publish_then_go_on() -> str:
        await broadcast.publish(Layer(), {"type": MESSAGE_TYPE, "thread": 1})
        await asyncio.sleep(0)
        return "went on streaming"

    run = asyncio.ensure_future(publish_then_go_on())
    with pytest.raises(asyncio.CancelledError):
        await run


class _SaysThenWaits:
    """Streams ``Hello `` (``said`` is set then), then waits for ever: until its run is cancelled."""

    def __init__(self) -> None:
        self.said = threading.Event()

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        if on_text is not None:
            on_text("Hello ")
        self.said.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable: nothing sets the event")


@pytest.mark.django_db(transaction=True)
def test_a_stopped_pump_stores_nothing_its_robot_emits_as_it_unwinds(settings: Any, monkeypatch: Any) -> None:
    """A cancel stops the pump, which cancels its robot; the robot's own ``run.cancelled`` and ``stream.ended``
    (no reply) would end a page's reply, and a protocol's stream, before the runner sends the reply the row
    keeps. The store that waits for the next batch in the sync caller's thread (a worker's, a Celery task's) is
    running when the robot unwinds: the spy (calling through) says when the second one started, the long flush
    interval keeps it waiting there, so it would write them."""
    settings.ROBOTLAB = {**settings.ROBOTLAB, "STREAM_FLUSH_INTERVAL": 30, "STREAM_FLUSH_DELTAS": 100}
    llm = _SaysThenWaits()
    robot = services.build_robot("echo", llm=llm)
    thread = services.get_thread("s-stopped")
    row = services.start_run(thread, "echo", "talk")
    stores = threading.Semaphore(0)
    wait_and_store = event_stream._Batches.wait_and_store

    def spy(self: Any, thread_id: Any, result_id: Any) -> Any:
        stores.release()
        return wait_and_store(self, thread_id, result_id)

    monkeypatch.setattr(event_stream._Batches, "wait_and_store", spy)

    async def stop_it_midway() -> None:
        pump = asyncio.ensure_future(event_stream.astream_run(
            thread.pk, row.pk, lambda on_event: robot.arun("talk", run_id=row.run_id, on_event=on_event)))
        for ready in (lambda: llm.said.wait(10), lambda: stores.acquire(timeout=10),
                      lambda: stores.acquire(timeout=10)):
            assert await asyncio.to_thread(ready)
        pump.cancel()  # as robotlab_django.runs.watch.watch does once it reads the cancel
        with pytest.raises(asyncio.CancelledError):
            await pump

    call_sync(stop_it_midway)  # returns once the store waiting in this thread returned
    stored = list(RunEvent.objects.filter(result=row).order_by("pk").values_list("kind", "data"))
    assert stored == [("run.started", {"robot": "echo", "message": "talk"}), ("text.delta", {"text": "Hello "})]
