"""A memory shared by processes through Redis (``namespace=``): robotlab.memory.change_feed and redis_backend.

These tests use Redis database 12 (the single-process Redis tests use database 0). Pub/sub
channels are global to the server, so every test uses a namespace of its own.
"""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import os
import queue
import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.errors import AwaitTimeout
from robotlab.memory import Memory, MemoryChange, create_memory
from robotlab.memory.change_feed import change_feed, decode_change, message_prefix
from tests.robotlab.memory import shared_worker
from tests.robotlab.memory.helpers import SignallingWaiter, redis_or_skip, run_in_thread

SHARED_URL = "redis://127.0.0.1:6379/12"


@pytest.fixture
def shared() -> Iterator[Any]:
    """``shared(namespace=None, **options)`` makes memories on database 12; their keys are removed after."""
    redis_or_skip(SHARED_URL)
    memories: list[Memory] = []

    def make(namespace: str | None = None, **options: Any) -> Memory:
        memory = Memory(redis_url=SHARED_URL, namespace=namespace or f"test-{uuid.uuid4()}", **options)
        memories.append(memory)
        return memory

    yield make
    for memory in memories:
        memory.clear()
        memory.close()


def _spawn(target: Any, *args: Any) -> multiprocessing.process.BaseProcess:
    process = multiprocessing.get_context("spawn").Process(target=target, args=args, daemon=True)
    process.start()
    return process


def _stop(process: multiprocessing.process.BaseProcess) -> None:
    process.join(30)
    if process.is_alive():
        process.terminate()
        process.join(5)


# ---- one process ------------------------------------------------------------------------------


def test_the_change_message_round_trip() -> None:
    prefix = message_prefix("origin-1", "k", '{"a":[1]}', writer="bot", network_name="net")
    origin, change = decode_change(prefix + '"old"}')
    assert origin == "origin-1"
    assert (change.key, change.value, change.previous, change.writer, change.network_name) == (
        "k", {"a": [1]}, "old", "bot", "net")
    assert change.timestamp.tzinfo is not None
    with pytest.raises(ValueError, match="Not a memory change message"):
        decode_change('{"k": 1}')


def test_memories_with_one_namespace_share_keys_and_others_do_not(shared: Any) -> None:
    first = shared("turn-a")
    second = shared("turn-a")
    other = shared("turn-b")
    first.set("answer", {"text": "hi"})
    assert second.get("answer") == {"text": "hi"} and second.keys() == ["answer"]
    assert other.get("answer") is None and other.keys() == []
    with pytest.raises(AwaitTimeout):
        other.get("answer", wait=0.05)


def test_a_write_wakes_a_waiter_of_another_memory_of_the_namespace(shared: Any,
                                                                   signalling_waiter: type[SignallingWaiter]) -> None:
    writer = shared()
    reader = shared(writer._backend.namespace.rsplit(":", 1)[1])
    thread, box = run_in_thread(lambda: reader.get("k", wait=60))
    assert signalling_waiter.entered.wait(5)
    writer.set("k", [1, 2])
    thread.join(10)  # woken by the write, long before the wait's own timeout
    assert box == {"value": [1, 2]}
    assert reader._waiters.pending == {}


async def test_aget_is_woken_by_another_memory_of_the_namespace(shared: Any) -> None:
    writer = shared("aget-" + uuid.uuid4().hex)
    reader = shared(writer._backend.namespace.rsplit(":", 1)[1])
    task = asyncio.create_task(reader.aget("k", wait=60))
    await asyncio.sleep(0)  # the task registers its waiter in its first step
    assert "k" in reader._waiters.pending
    writer.set("k", "v")
    assert await asyncio.wait_for(task, 10) == "v"


def test_subscribers_hear_the_other_memory_once_and_in_order(shared: Any) -> None:
    first = shared(network_name="support")
    second = shared(first._backend.namespace.rsplit(":", 1)[1], network_name="support")
    heard: list[tuple[str, str, Any, Any, str | None, int]] = []
    first_done, second_done = threading.Event(), threading.Event()

    def record(name: str) -> Any:
        def callback(change: MemoryChange) -> None:
            heard.append((name, change.key, change.value, change.previous, change.writer, threading.get_ident()))
            if (name, change.key) == ("first", "sync"):
                first_done.set()
            if (name, change.value) == ("second", 2):
                second_done.set()
        return callback

    first.subscribe_pattern("*", callback=record("first"))
    second.subscribe("k", callback=record("second"))
    first.current_writer = "robot_a"
    first.set("k", 1)
    first.set("k", 2)
    second.set("sync", True)  # heard by first after any echo of its own writes would have been
    assert first_done.wait(10) and second_done.wait(10)
    mine = [entry[:5] for entry in heard if entry[0] == "first"]
    assert mine == [("first", "k", 1, None, "robot_a"), ("first", "k", 2, 1, "robot_a"),
                    ("first", "sync", True, None, None)]  # its own writes once, no echo
    theirs = [entry[:5] for entry in heard if entry[0] == "second"]
    assert theirs == [("second", "k", 1, None, "robot_a"), ("second", "k", 2, 1, "robot_a")]
    assert all(entry[5] != threading.get_ident() for entry in heard if entry[2] is True)  # delivered on a thread


def test_namespace_validation_and_backend_rules() -> None:
    with pytest.raises(ValueError, match="Invalid memory namespace 'a b'"):
        Memory(redis_url=SHARED_URL, namespace="a b")
    with pytest.raises(ValueError, match="Invalid memory namespace 'x:y'"):
        Memory(redis_url=SHARED_URL, namespace="x:y")
    with pytest.raises(ValueError, match="need the Redis backend"):
        Memory(backend="hash", namespace="turn-1")
    with pytest.raises(ValueError, match="ttl must be a positive number"):
        Memory(redis_url=SHARED_URL, namespace="turn-1", ttl=0)


def test_a_namespace_requires_redis_even_with_auto() -> None:
    from robotlab.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="Cannot use Redis at redis://127.0.0.1:1/0 for memory"):
        create_memory(redis_url="redis://127.0.0.1:1/0", namespace="turn-1")


def test_clear_removes_the_namespace_for_everyone_and_ttl_expires_keys(shared: Any) -> None:
    client = redis_or_skip(SHARED_URL)
    memory = shared("turn-ttl-" + uuid.uuid4().hex, ttl=60)
    other = shared(memory._backend.namespace.rsplit(":", 1)[1])
    memory.set("a", 1)
    memory["b"] = 2
    other.set("c", 3)
    names = sorted(client.scan_iter(match=f"{memory._backend.namespace}:*"))
    assert [name.rsplit(":", 1)[1] for name in names] == ["a", "b", "c"]
    assert 0 < client.pttl(f"{memory._backend.namespace}:a") <= 60_000
    assert client.pttl(f"{memory._backend.namespace}:c") == -1  # the other memory has no ttl
    memory.clear()
    assert other.keys() == [] and list(client.scan_iter(match=f"{memory._backend.namespace}:*")) == []


def test_close_and_garbage_collection_stop_listening(shared: Any) -> None:
    memory = shared()
    memory.subscribe("k", callback=lambda change: None)
    feed = change_feed(SHARED_URL, memory._backend.client)
    channel = memory._backend.channel
    assert channel in feed.channels()
    memory.close()
    assert channel not in feed.channels()
    memory.subscribe("k", callback=lambda change: None)  # listening again
    assert channel in feed.channels()
    loose = Memory(redis_url=SHARED_URL, namespace=f"loose-{uuid.uuid4().hex}")
    loose.subscribe("k", callback=lambda change: None)
    loose_channel = loose._backend.channel
    assert loose_channel in feed.channels()
    del loose
    gc.collect()
    assert loose_channel not in feed.channels()


# ---- two processes ----------------------------------------------------------------------------


def test_a_process_waiting_on_get_wakes_when_another_sets_and_subscriptions_cross(shared: Any) -> None:
    namespace = f"turn-{uuid.uuid4().hex}"
    memory = shared(namespace, network_name="support")
    memory.current_writer = "parent_robot"
    heard: queue.Queue[MemoryChange] = queue.Queue()
    memory.subscribe("child:done", callback=heard.put)
    results = multiprocessing.get_context("spawn").Queue()
    child = _spawn(shared_worker.wait_for_parent, SHARED_URL, namespace, results)
    try:
        assert results.get(timeout=60) == ("waiting",)  # the child blocks in get("k", wait=...)
        memory.set("k", {"from": "parent"})
        reports: dict[str, Any] = {}
        while not {"woke", "change"} <= reports.keys():  # in either order (and the child's next wait)
            report = results.get(timeout=30)
            reports.setdefault(report[0], report[1:])
        assert reports["woke"][0] == {"from": "parent"}
        change = reports["change"]  # the child's pattern subscription heard the parent's write
        assert {k: change[0][k] for k in ("key", "value", "writer", "network_name")} == {
            "key": "k", "value": {"from": "parent"}, "writer": "parent_robot", "network_name": "support"}
        done = heard.get(timeout=30)  # the parent's subscription heard the child's write
        assert (done.key, done.value, done.writer) == ("child:done", child.pid, "child_robot")
        assert child.pid != os.getpid()
        memory.set("bye", True)
    finally:
        _stop(child)
    assert child.exitcode == 0


def test_cross_process_wake_latency(shared: Any, signalling_waiter: type[SignallingWaiter],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    namespace = f"latency-{uuid.uuid4().hex}"
    memory = shared(namespace)
    commands = multiprocessing.get_context("spawn").Queue()
    child = _spawn(shared_worker.set_on_command, SHARED_URL, namespace, commands)
    latencies: list[float] = []
    try:
        for index in range(21):  # the first round includes the child's start-up
            signalling_waiter.entered.clear()
            box: dict[str, Any] = {}

            def wait(key: str = f"k{index}", box: dict[str, Any] = box) -> None:
                box["value"] = memory.get(key, wait=60)
                box["woke_at"] = time.monotonic()

            thread = threading.Thread(target=wait)
            thread.start()
            assert signalling_waiter.entered.wait(10)
            commands.put(f"k{index}")
            thread.join(30)  # woken by the write, long before the wait's own timeout
            set_at, pid = box["value"]
            assert pid == child.pid != os.getpid()
            if index:
                latencies.append((box["woke_at"] - set_at) * 1000)
        commands.put(None)
    finally:
        _stop(child)
    assert len(latencies) == 20
    with capsys.disabled():
        print(f"\ncross-process wake latency over {len(latencies)} tries: p50={statistics.median(latencies):.2f} ms "
              f"max={max(latencies):.2f} ms")


def test_a_forked_child_hears_writes_through_a_memory_it_inherited(shared: Any) -> None:
    """The parent listens (its feed thread runs) before forking; the child's copy gets a feed of its own.

    Without the at-fork reset of the feeds the child keeps the parent's feed, whose thread does
    not exist in the child, and never wakes (this test then fails on its 30 s timeout).
    """
    memory = shared()
    memory.subscribe("k", callback=lambda change: None)  # the parent's feed is running
    results = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=shared_worker.use_inherited_memory,
                                                        args=(memory, results), daemon=True)
    child.start()
    try:
        assert results.get(timeout=30) == ("waiting",)  # the child blocks in get("k", wait=...)
        memory.set("k", "from the parent")
        assert results.get(timeout=30) == ("woke", "from the parent")
    finally:
        _stop(child)
    assert child.exitcode == 0


def test_after_a_reconnect_the_waited_keys_are_looked_up_again(shared: Any,
                                                              signalling_waiter: type[SignallingWaiter]) -> None:
    """A write whose message was lost while the feed's connection was down still wakes the waiter."""
    client = redis_or_skip(SHARED_URL)
    memory = shared()
    thread, box = run_in_thread(lambda: memory.get("k", wait=60))
    assert signalling_waiter.entered.wait(5)
    feed = change_feed(SHARED_URL, memory._backend.client)
    host, port = feed._pubsub.connection._sock.getsockname()[:2]
    client.set(f"{memory._backend.namespace}:k", '"written while nobody listened"')  # no message at all
    client.client_kill_filter(addr=f"{host}:{port}")  # this feed's connection only
    thread.join(30)  # redis-py reconnects and resubscribes; the resubscription triggers the look-up
    assert box == {"value": "written while nobody listened"}


def test_a_private_redis_memory_neither_publishes_nor_listens() -> None:
    """Without ``namespace=`` nobody else can name the memory: it costs what it did before sharing existed."""
    client = redis_or_skip(SHARED_URL)
    memory = Memory(backend="redis", redis_url=SHARED_URL, ttl=60)
    try:
        assert not memory._backend.shared
        memory.subscribe("k", callback=lambda change: None)
        with pytest.raises(AwaitTimeout):
            memory.get("missing", wait=0.01)
        assert memory._backend.channel not in change_feed(SHARED_URL, memory._backend.client).channels()
        assert client.pubsub_numsub(memory._backend.channel) == [(memory._backend.channel, 0)]
        assert memory.set("k", 1) == 1 and memory.set("k", 2) == 2
        assert 0 < client.pttl(f"{memory._backend.namespace}:k") <= 60_000  # ttl on the unpublished path too
    finally:
        memory.clear()
