"""Key and pattern subscriptions and their delivery: robotlab.memory.subscriptions."""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from typing import Any

import pytest

from robotlab.memory import Memory, MemoryChange
from tests.robotlab.memory.helpers import answer, result, run_in_thread

# ---- subscriptions ------------------------------------------------------------------------


def test_subscribe_returns_a_uuid_and_receives_changes() -> None:
    memory = Memory(network_name="pipeline")
    changes: list[MemoryChange] = []
    subscription_id = memory.subscribe("status", "other", callback=changes.append)
    assert str(uuid.UUID(subscription_id)) == subscription_id
    memory.current_writer = "classifier"
    memory.set("status", "new")
    memory.set("status", "done")
    memory.set("unrelated", 1)
    assert [(c.key, c.value, c.previous, c.writer, c.network_name) for c in changes] == [
        ("status", "new", None, "classifier", "pipeline"),
        ("status", "done", "new", "classifier", "pipeline"),
    ]
    assert changes[0].is_created and changes[1].is_updated
    assert changes[0].timestamp.tzinfo is not None


def test_subscribe_callback_forms() -> None:
    memory = Memory()
    calls: list[str] = []
    positional = memory.subscribe("a", "b", lambda change: calls.append(f"positional:{change.key}"))

    @memory.subscriber("a")
    def decorated(change: MemoryChange) -> None:
        calls.append(f"decorated:{change.key}")

    subscription_id = decorated.subscription_id
    assert callable(decorated) and str(uuid.UUID(subscription_id)) == subscription_id
    memory.set("a", 1)
    memory.set("b", 2)
    assert calls == ["positional:a", "decorated:a", "positional:b"]
    assert memory.unsubscribe(positional) and memory.unsubscribe(subscription_id)


def test_subscribe_requires_a_callback() -> None:
    memory = Memory()
    with pytest.raises(ValueError, match="^Block required for subscribe$"):
        memory.subscribe("k", callback=None)
    with pytest.raises(ValueError, match="^Block required for subscribe$"):
        memory.subscribe("k")  # RobotLab: subscribe without a block raises
    with pytest.raises(ValueError, match="^Block required for subscribe$"):
        memory.subscriber("k")("not callable")
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.subscribe_pattern("k*", None)
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.subscribe_pattern("k*", callback=42)
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.subscribe_pattern("k*")
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.pattern_subscriber("k*")(None)
    assert not memory.is_subscribed("k")


def test_callbacks_run_synchronously_on_the_writer_thread() -> None:
    memory = Memory()
    threads: list[int] = []
    memory.subscribe("k", callback=lambda change: threads.append(threading.get_ident()))
    memory.set("k", 1)
    assert threads == [threading.get_ident()]  # already called when set returned
    thread, box = run_in_thread(lambda: (memory.set("k", 2), threading.get_ident())[1])
    thread.join(5)
    assert threads[1] == box["value"]


async def test_callbacks_run_in_order_inside_a_running_loop() -> None:
    memory = Memory()
    calls: list[str] = []
    memory.subscribe("k", callback=lambda change: calls.append("first"))
    memory.subscribe_pattern("k*", callback=lambda change: calls.append("pattern"))
    memory.subscribe("k", callback=lambda change: calls.append("second"))
    memory.set("k", 1)
    assert calls == ["first", "second", "pattern"]


def test_writes_from_callbacks_are_delivered_after_the_current_ones() -> None:
    memory = Memory()
    calls: list[str] = []

    def cascade(change: MemoryChange) -> None:
        calls.append(f"a1:{change.value}")
        memory.set("b", change.value * 10)
        calls.append("a1 done")

    memory.subscribe("a", callback=cascade)
    memory.subscribe("a", callback=lambda change: calls.append("a2"))
    memory.subscribe("b", callback=lambda change: calls.append(f"b:{change.value}"))
    memory.set("a", 1)
    assert calls == ["a1:1", "a1 done", "a2", "b:10"]


def test_a_failing_callback_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    memory = Memory()
    calls: list[str] = []

    def broken(change: MemoryChange) -> None:
        raise RuntimeError("boom")

    memory.subscribe("k", callback=broken)
    memory.subscribe("k", callback=lambda change: calls.append("ok"))
    with caplog.at_level(logging.ERROR, logger="robotlab.memory"):
        assert memory.set("k", 1) == 1
    assert calls == ["ok"]
    assert "boom" in caplog.text
    memory.set("k", 2)
    assert calls == ["ok", "ok"]


def test_coroutine_callback_outside_a_loop_runs_before_set_returns() -> None:
    memory = Memory()
    seen: list[Any] = []

    async def on_change(change: MemoryChange) -> None:
        await asyncio.sleep(0)
        seen.append(change.value)

    memory.subscribe("k", callback=on_change)
    memory.set("k", "v")
    assert seen == ["v"]


async def test_coroutine_callback_inside_a_loop_becomes_a_task() -> None:
    memory = Memory()
    seen: list[Any] = []
    done = asyncio.Event()

    async def on_change(change: MemoryChange) -> None:
        seen.append(change.value)
        done.set()

    memory.subscribe("k", callback=on_change)
    memory.set("k", "v")
    await asyncio.wait_for(done.wait(), 5)
    assert seen == ["v"]


def test_set_on_a_reserved_key_notifies() -> None:
    memory = Memory()
    changes: list[MemoryChange] = []
    memory.subscribe("session_id", callback=changes.append)
    memory.set("session_id", "s1")
    assert memory.session_id == "s1"
    assert [(c.key, c.value, c.previous) for c in changes] == [("session_id", "s1", None)]


def test_only_set_notifies() -> None:
    memory = Memory()
    seen: list[str] = []
    memory.subscribe_pattern("*", callback=lambda change: seen.append(change.key))
    memory.set("k", 1)
    memory["custom"] = 2
    memory.data["k"] = 3
    memory["results"] = [result()]
    memory.append_result(result())
    memory.set_results([])
    memory["messages"] = [answer()]
    memory["session_id"] = "s"
    memory.session_id = "t"
    memory.delete("k")
    memory.clear()
    memory.reset()
    assert seen == ["k", "custom"]


def test_current_writer_is_recorded() -> None:
    memory = Memory()
    writers: list[str | None] = []
    memory.subscribe("k", callback=lambda change: writers.append(change.writer))
    memory.set("k", 1)
    memory.current_writer = "robot_a"
    memory.set("k", 2)
    thread, _ = run_in_thread(lambda: memory.set("k", 3))  # a thread that never set it sees the last value
    thread.join(5)
    memory.current_writer = None
    memory.set("k", 4)
    assert writers == [None, "robot_a", "robot_a", None]


async def test_current_writer_is_per_task() -> None:
    memory = Memory()
    writers: dict[str, str | None] = {}
    memory.subscribe_pattern("*", callback=lambda change: writers.__setitem__(change.key, change.writer))
    a_named, b_wrote = asyncio.Event(), asyncio.Event()

    async def robot_a() -> None:
        memory.current_writer = "a"
        a_named.set()
        await b_wrote.wait()
        memory.set("from_a", 1)

    async def robot_b() -> None:
        await a_named.wait()
        memory.current_writer = "b"
        memory.set("from_b", 1)
        b_wrote.set()

    await asyncio.gather(robot_a(), robot_b())
    assert writers == {"from_a": "a", "from_b": "b"}


def test_pattern_subscriptions() -> None:
    memory = Memory()
    seen: list[str] = []
    memory.subscribe_pattern("analysis:*", callback=lambda change: seen.append(change.key))
    memory.subscribe_pattern("v?", lambda change: seen.append(f"?{change.key}"))
    memory.subscribe_pattern("a.b[1]", lambda change: seen.append(f"literal:{change.key}"))
    for key in ("analysis:tone", "analysis:", "my_analysis:tone", "analysis", "v1", "v12", "v",
                "a.b[1]", "axb1"):
        memory.set(key, 1)
    assert seen == ["analysis:tone", "analysis:", "?v1", "literal:a.b[1]"]
    assert memory.is_subscribed("analysis:x") and memory.is_subscribed("v2")
    assert not memory.is_subscribed("x_analysis:") and not memory.is_subscribed("v")
    with pytest.raises(TypeError):
        memory.subscribe_pattern(1, callback=print)  # type: ignore[arg-type]


def test_pattern_decorator() -> None:
    memory = Memory()
    seen: list[str] = []

    @memory.pattern_subscriber("k*")
    def on_k(change: MemoryChange) -> None:
        seen.append(change.key)

    memory.set("key", 1)
    assert seen == ["key"]
    assert memory.unsubscribe(on_k.subscription_id)


def test_unsubscribe() -> None:
    memory = Memory()
    seen: list[str] = []
    both = memory.subscribe("a", "b", callback=lambda change: seen.append(f"both:{change.key}"))
    pattern = memory.subscribe_pattern("a*", callback=lambda change: seen.append(f"pattern:{change.key}"))
    assert memory.is_subscribed("a") and memory.is_subscribed("b")
    assert memory.unsubscribe(both) is True
    assert memory.unsubscribe(both) is False
    assert memory.unsubscribe("not-an-id") is False
    assert not memory.is_subscribed("b") and memory.is_subscribed("a")  # the pattern still matches
    memory.set("a", 1)
    assert memory.unsubscribe(pattern) is True
    memory.set("a", 2)
    assert seen == ["pattern:a"]
    assert not memory.is_subscribed("a")


def test_unsubscribe_keys_leaves_pattern_subscriptions() -> None:
    memory = Memory()
    seen: list[str] = []
    memory.subscribe("a", callback=lambda change: seen.append("key"))
    memory.subscribe("b", callback=lambda change: seen.append("b"))
    memory.subscribe_pattern("a", callback=lambda change: seen.append("pattern"))
    assert memory.unsubscribe_keys("a", "missing") is memory
    memory.set("a", 1)
    memory.set("b", 1)
    assert seen == ["pattern", "b"]
    assert memory.is_subscribed("a")  # through the pattern


def test_subscribe_with_no_keys_subscribes_to_nothing() -> None:
    memory = Memory()
    seen: list[MemoryChange] = []
    subscription_id = memory.subscribe(callback=seen.append)
    memory.set("k", 1)
    assert seen == [] and memory.unsubscribe(subscription_id) is False
