from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import logging
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import robotlab.memory as memory_module
from robotlab.config import reload_config
from robotlab.errors import AwaitTimeout, ConfigurationError
from robotlab.memory import (
    RESERVED_KEYS,
    TIMEOUT,
    Memory,
    MemoryChange,
    ResponseCache,
    StateProxy,
    Waiter,
    create_memory,
)
from robotlab.messages import Message, TextMessage, ToolMessage, ToolResultMessage
from robotlab.result import RobotResult

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No Redis unless a test asks for it: no REDIS_URL, no config files."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("ROBOT_LAB_REDIS_URL", raising=False)
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


class SignallingWaiter(Waiter):
    """A Waiter that announces when a thread starts waiting and records each timeout."""

    entered = threading.Event()
    timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> Any:
        type(self).timeouts.append(timeout)
        type(self).entered.set()
        return super().wait(timeout)


@pytest.fixture
def signalling_waiter(monkeypatch: pytest.MonkeyPatch) -> type[SignallingWaiter]:
    SignallingWaiter.entered = threading.Event()
    SignallingWaiter.timeouts = []
    monkeypatch.setattr(memory_module, "Waiter", SignallingWaiter)
    return SignallingWaiter


def answer(text: str = "Hi") -> TextMessage:
    return TextMessage(role="assistant", content=text, stop_reason="stop")


def result(name: str = "helper", text: str = "Hi") -> RobotResult:
    created = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    tool = ToolResultMessage(tool=ToolMessage(id="c1", name="lookup", input={"q": 1}), content={"data": 2})
    return RobotResult(robot_name=name, output=[answer(text)], tool_calls=[tool], created_at=created)


def run_in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


# ---- Waiter -----------------------------------------------------------------------------------


def test_waiter_returns_at_once_when_already_signaled() -> None:
    waiter = Waiter()
    assert not waiter.is_signaled
    waiter.signal({"v": 1})
    assert waiter.is_signaled
    assert waiter.wait() == {"v": 1}
    assert waiter.wait(timeout=0) == {"v": 1}


def test_waiter_timeout_returns_the_timeout_string() -> None:
    waiter = Waiter()
    assert waiter.wait(timeout=0.01) == "timeout" == TIMEOUT
    assert not waiter.is_signaled


def test_waiter_is_woken_from_another_thread() -> None:
    waiter = Waiter()
    started = threading.Event()

    def wait() -> Any:
        started.set()
        return waiter.wait()

    thread, box = run_in_thread(wait)
    assert started.wait(5)
    waiter.signal("done")
    thread.join(5)
    assert box == {"value": "done"}


def test_waiter_wakes_every_waiting_thread() -> None:
    waiter = Waiter()
    ready = threading.Barrier(4)

    def wait() -> Any:
        ready.wait(5)
        return waiter.wait(timeout=5)

    runs = [run_in_thread(wait) for _ in range(3)]
    ready.wait(5)
    waiter.signal(7)
    for thread, box in runs:
        thread.join(5)
        assert box == {"value": 7}


def test_waiter_close() -> None:
    closed = Waiter()
    closed.close()
    assert closed.wait() == "timeout"  # returns at once instead of waiting forever
    signaled = Waiter()
    signaled.signal(1)
    signaled.close()
    assert signaled.wait() == 1


def test_waiter_close_releases_a_blocked_thread() -> None:
    waiter = Waiter()
    started = threading.Event()

    def wait() -> Any:
        started.set()
        return waiter.wait()

    thread, box = run_in_thread(wait)
    assert started.wait(5)
    waiter.close()
    thread.join(5)
    assert box == {"value": "timeout"}


# ---- MemoryChange -----------------------------------------------------------------------------


def test_memory_change_predicates() -> None:
    created = MemoryChange(key="k", value=1)
    assert created.is_created and not created.is_updated and not created.is_deleted
    updated = MemoryChange(key="k", value=2, previous=1)
    assert updated.is_updated and not updated.is_created and not updated.is_deleted
    deleted = MemoryChange(key="k", value=None, previous=2)
    assert deleted.is_deleted and not deleted.is_created and not deleted.is_updated
    neither = MemoryChange(key="k", value=None)
    assert not (neither.is_created or neither.is_updated or neither.is_deleted)
    falsy = MemoryChange(key="k", value=0, previous=False)
    assert falsy.is_updated


def test_memory_change_fields_and_defaults() -> None:
    change = MemoryChange("k", 1, None, "writer", "net")
    assert (change.key, change.value, change.previous, change.writer, change.network_name) == (
        "k", 1, None, "writer", "net")
    assert change.correlation_id is None
    assert change.timestamp.tzinfo is not None
    assert datetime.now(UTC) - change.timestamp < timedelta(minutes=1)
    naive = MemoryChange(key="k", value=1, timestamp=datetime(2025, 1, 1, 12, 0, 0))
    assert naive.timestamp == datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.value = 2  # type: ignore[misc]


def test_memory_change_to_dict_drops_none_and_uses_iso8601() -> None:
    moment = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
    change = MemoryChange(key="k", value={"a": 1}, writer="bot", timestamp=moment)
    assert change.to_dict() == {"key": "k", "value": {"a": 1}, "writer": "bot",
                                "timestamp": "2025-03-04T05:06:07+00:00"}
    assert json.loads(change.to_json()) == change.to_dict()
    assert change.to_json() == ('{"key":"k","value":{"a":1},"writer":"bot",'
                                '"timestamp":"2025-03-04T05:06:07+00:00"}')
    offset = MemoryChange(key="k", value=1, timestamp=moment.astimezone(timezone(timedelta(hours=2))))
    assert offset.to_dict()["timestamp"] == "2025-03-04T07:06:07+02:00"


def test_memory_change_from_dict_round_trip() -> None:
    moment = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    change = MemoryChange(key="k", value=2, previous=1, writer="a", network_name="n", timestamp=moment,
                          correlation_id="c-1")
    assert MemoryChange.from_dict(change.to_dict()) == change
    assert MemoryChange.from_dict(json.loads(change.to_json())) == change
    bare = MemoryChange.from_dict({"key": "k"})
    assert bare.value is None and bare.timestamp.tzinfo is not None


# ---- StateProxy -------------------------------------------------------------------------------


def test_state_proxy_item_and_attribute_access() -> None:
    proxy = StateProxy({"count": 0, "name": "test"})
    assert proxy["count"] == 0
    assert proxy.name == "test"
    proxy.count = 1
    proxy["extra"] = None
    assert proxy.to_dict() == {"count": 1, "name": "test", "extra": None}
    assert proxy.extra is None
    with pytest.raises(AttributeError, match="missing"):
        _ = proxy.missing
    with pytest.raises(KeyError):
        _ = proxy["missing"]
    assert proxy.get("missing") is None
    assert "count" in proxy and proxy.has_key("count") and not proxy.has_key("missing")
    assert len(proxy) == 3 and not proxy.is_empty
    assert StateProxy().is_empty and StateProxy(None).to_dict() == {}
    assert list(proxy.keys()) == ["count", "name", "extra"]
    assert list(proxy.values()) == [1, "test", None]
    assert dict(proxy.items()) == proxy.to_dict()
    assert proxy == {"count": 1, "name": "test", "extra": None}
    del proxy.extra
    assert "extra" not in proxy
    with pytest.raises(AttributeError):
        del proxy.extra


def test_state_proxy_keys_must_be_strings() -> None:
    with pytest.raises(TypeError, match="Memory keys must be str"):
        StateProxy({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        StateProxy()[2] = "x"  # type: ignore[index]


def test_state_proxy_on_change_only_when_the_value_changes() -> None:
    changes: list[tuple[str, Any, Any]] = []
    proxy = StateProxy({"a": 1}, on_change=lambda key, old, new: changes.append((key, old, new)))
    proxy["a"] = 1  # same value: nothing
    proxy["a"] = 2
    proxy.b = "x"
    proxy["c"] = None  # None over "missing" (None): nothing, as in RobotLab
    proxy.delete("b")  # deletes never call on_change
    assert proxy.merge({"a": 3, "d": 4}) is proxy
    assert changes == [("a", 1, 2), ("b", None, "x"), ("a", 2, 3), ("d", None, 4)]


def test_state_proxy_delete_returns_the_value() -> None:
    proxy = StateProxy({"a": 1})
    assert proxy.delete("a") == 1
    assert proxy.delete("a") is None
    assert proxy.is_empty


def test_state_proxy_copies() -> None:
    calls: list[str] = []
    source = {"nested": {"list": [1]}}
    proxy = StateProxy(source, on_change=lambda key, old, new: calls.append(key))
    proxy["nested"]["list"].append(2)
    assert source["nested"]["list"] == [1, 2]  # the constructor copies shallowly, like Ruby
    plain = proxy.to_dict()
    plain["other"] = 1
    assert "other" not in proxy
    deep = proxy.copy()
    deep["nested"]["list"].append(3)
    assert proxy["nested"]["list"] == [1, 2]
    deep["x"] = 1
    assert calls == ["x"]  # the copy keeps on_change
    assert copy.deepcopy(proxy) == proxy and copy.deepcopy(proxy)["nested"] is not proxy["nested"]
    assert copy.copy(proxy)["nested"] is proxy["nested"]
    assert repr(StateProxy({"a": 1})) == "StateProxy({'a': 1})"


# ---- construction, reserved keys --------------------------------------------------------------


def test_reserved_keys() -> None:
    assert RESERVED_KEYS == ("data", "results", "messages", "session_id", "cache")


def test_defaults() -> None:
    memory = Memory()
    assert isinstance(memory.data, StateProxy) and memory.data.is_empty
    assert memory.results == [] and memory.messages == []
    assert memory.session_id is None and memory.network_name is None and memory.current_writer is None
    assert isinstance(memory.cache, ResponseCache) and memory.enable_cache
    assert not memory.is_redis
    assert memory.keys() == [] and memory.all_keys() == list(RESERVED_KEYS)


def test_constructor_arguments() -> None:
    memory = Memory(data={"tier": "gold"}, results=[result()], messages=[{"role": "user", "content": "hi"}],
                    session_id="s-1", enable_cache=False, network_name="support")
    assert memory.data.tier == "gold"
    assert [r.robot_name for r in memory.results] == ["helper"]
    assert memory.messages == [TextMessage(role="user", content="hi")]
    assert memory.session_id == "s-1" and memory.network_name == "support"
    assert memory.cache is None and not memory.enable_cache
    with pytest.raises(AttributeError):
        memory.network_name = "other"  # type: ignore[misc]


def test_create_memory_factory() -> None:
    memory = create_memory(data={"a": 1}, enable_cache=False, network_name="n", session_id="s")
    assert isinstance(memory, Memory)
    assert memory.data.to_dict() == {"a": 1}
    assert memory.cache is None and memory.network_name == "n" and memory.session_id == "s"
    assert create_memory().data.to_dict() == {}


def test_data_assignment_replaces_the_proxy_silently() -> None:
    memory = Memory(data={"a": 1})
    seen: list[MemoryChange] = []
    memory.subscribe("data", callback=seen.append)
    memory.subscribe_pattern("*", callback=seen.append)
    first = memory.data
    memory["data"] = {"b": 2}
    assert memory.data is not first and memory.data.to_dict() == {"b": 2}
    assert memory["data"] is memory.data and memory.get("data") is memory.data
    memory.data = {"c": 3}
    assert memory.data.c == 3
    memory["data"] = None
    assert memory.data.to_dict() == {}
    with pytest.raises(TypeError, match="data must be a mapping"):
        memory["data"] = [1, 2]
    assert seen == []


def test_data_writes_are_not_reactive() -> None:
    memory = Memory()
    seen: list[MemoryChange] = []
    memory.subscribe("category", "data", callback=seen.append)
    memory.subscribe_pattern("*", callback=seen.append)
    memory.data["category"] = "billing"
    memory.data.resolved = True
    memory.data.merge({"x": 1})
    assert memory.data.category == "billing"
    assert seen == []
    assert memory.get("category") is None and not memory.has_key("category")
    assert memory.to_dict()["data"] == {"category": "billing", "resolved": True, "x": 1}


def test_results_and_messages_are_normalized_to_lists() -> None:
    memory = Memory()
    one = result()
    memory["results"] = one
    assert memory.results == [one]
    memory["results"] = None
    assert memory.results == []
    memory["results"] = [one.export()]
    assert isinstance(memory.results[0], RobotResult) and memory.results[0].checksum == one.checksum
    memory.results = (one, one)
    assert memory.results == [one, one]

    memory["messages"] = {"role": "user", "content": "hi"}
    assert memory.messages == [TextMessage(role="user", content="hi")]
    memory["messages"] = [answer(), {"type": "text", "role": "assistant", "content": "x"}]
    assert [type(m) for m in memory.messages] == [TextMessage, TextMessage]
    memory.messages = None
    assert memory.messages == []
    with pytest.raises(TypeError, match="Invalid message: must be Message or Hash"):
        memory["messages"] = [42]
    with pytest.raises(TypeError, match="Invalid message: must be Message or Hash"):
        Memory(messages=["hello"])  # type: ignore[list-item]


def test_results_and_messages_are_copies() -> None:
    memory = Memory(results=[result()], messages=[answer()])
    memory.results.append(result("other"))
    memory.messages.clear()
    assert len(memory.results) == 1 and len(memory.messages) == 1


def test_session_id() -> None:
    memory = Memory()
    memory["session_id"] = "abc"
    assert memory.session_id == "abc" and memory["session_id"] == "abc"
    memory.session_id = "def"
    assert memory.get("session_id") == "def"


def test_cache_cannot_be_reassigned() -> None:
    memory = Memory()
    with pytest.raises(ValueError, match="^Cannot reassign cache - it is initialized automatically$"):
        memory["cache"] = {}
    with pytest.raises(ValueError, match="^Cannot reassign cache - it is initialized automatically$"):
        memory.set("cache", {})
    with pytest.raises(ValueError, match="Cannot reassign cache"):
        memory.merge({"cache": None})
    assert memory["cache"] is memory.cache is Memory().cache  # one cache for the process
    assert Memory(enable_cache=False)["cache"] is None


def test_response_cache() -> None:
    cache = ResponseCache(max_entries=2)
    assert cache.fetch("q1", lambda: "a1") == "a1"
    assert cache.fetch("q1", lambda: pytest.fail("recomputed")) == "a1"
    assert cache.set("q2", "a2") == "a2"
    assert cache.get("q1") == "a1"  # q1 is now the most recent
    cache.set("q3", "a3")
    assert "q2" not in cache and "q1" in cache and len(cache) == 2
    assert cache.get("missing", "dflt") == "dflt"
    assert cache.delete("q1") == "a1" and cache.delete("q1") is None
    cache.clear()
    assert len(cache) == 0


def test_reserved_keys_always_exist_and_cannot_be_deleted() -> None:
    memory = Memory()
    for key in RESERVED_KEYS:
        assert memory.has_key(key) and key in memory
        with pytest.raises(ValueError, match=f"^Cannot delete reserved key: {key}$"):
            memory.delete(key)
    assert not memory.has_key("custom") and "custom" not in memory


def test_keys_must_be_strings() -> None:
    memory = Memory()
    for call in (lambda: memory.set(1, "x"), lambda: memory.get(1), lambda: memory[1],  # type: ignore
                 lambda: memory.has_key(1), lambda: 1 in memory, lambda: memory.delete(1),  # type: ignore
                 lambda: memory.subscribe(1, callback=print)):
        with pytest.raises(TypeError, match="Memory keys must be str"):
            call()
    with pytest.raises(TypeError, match="at least one key"):
        memory.get()  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        iter(memory)  # type: ignore[call-overload]


# ---- custom keys ------------------------------------------------------------------------------


def test_set_and_get() -> None:
    memory = Memory()
    value = {"score": 0.8}
    assert memory.set("sentiment", value) is value
    assert memory.get("sentiment") is value
    assert memory["sentiment"] is value
    assert memory.get("missing") is None and memory["missing"] is None
    memory["entities"] = ["a"]
    assert memory.get("sentiment", "entities", "missing") == {"sentiment": value, "entities": ["a"],
                                                              "missing": None}
    assert list(memory.get("entities", "sentiment")) == ["entities", "sentiment"]
    assert memory.get("data", "sentiment") == {"data": memory.data, "sentiment": value}


def test_keys_delete_clear_reset() -> None:
    memory = Memory(data={"a": 1}, results=[result()], messages=[answer()], session_id="s")
    memory.set("b", 2)
    memory.set("a", 1)
    assert memory.keys() == ["b", "a"]
    assert memory.all_keys() == [*RESERVED_KEYS, "b", "a"]
    assert memory.delete("b") == 2 and memory.delete("b") is None
    assert memory.keys() == ["a"]
    assert memory.clear() is memory
    assert memory.keys() == [] and memory.data.a == 1 and memory.session_id == "s"
    memory.set("c", 3)
    cache, data = memory.cache, memory.data
    assert memory.reset() is memory
    assert memory.keys() == [] and memory.data.to_dict() == {} and memory.data is not data
    assert memory.results == [] and memory.messages == [] and memory.session_id is None
    assert memory.cache is cache


def test_merge() -> None:
    memory = Memory()
    seen: list[str] = []
    memory.subscribe_pattern("*", callback=lambda change: seen.append(change.key))
    assert memory.merge({"a": 1, "session_id": "s", "data": {"d": 1}, "b": 2}) is memory
    assert memory.get("a", "b") == {"a": 1, "b": 2}
    assert memory.session_id == "s" and memory.data.d == 1
    assert seen == ["a", "b"]  # reserved keys are assigned silently


# ---- blocking reads ---------------------------------------------------------------------------


def test_get_wait_timeout_raises_with_the_key() -> None:
    memory = Memory()
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :sentiment after 0\.05 seconds$"):
        memory.get("sentiment", wait=0.05)
    assert memory._waiters == {}  # the timed-out waiter is gone


def test_get_wait_zero_is_a_wait_not_false() -> None:
    memory = Memory()
    with pytest.raises(AwaitTimeout, match="^Timeout waiting for :k after 0 seconds$"):
        memory.get("k", wait=0)
    assert memory.get("k", wait=False) is None
    assert memory.get("k", wait=None) is None
    with pytest.raises(TypeError, match="wait must be"):
        memory.get("k", wait="5")  # type: ignore[call-overload]


def test_get_wait_returns_existing_values_at_once() -> None:
    memory = Memory()
    memory.set("nothing", None)
    assert memory.get("nothing", wait=0.05) is None  # exists, value None: no timeout
    memory.set("k", 0)
    assert memory.get("k", wait=0) == 0
    assert memory.get("k", "nothing", wait=True) == {"k": 0, "nothing": None}
    assert memory.get("results", wait=0) == []  # reserved keys always exist


def test_get_wait_timeout_is_per_missing_key(signalling_waiter: type[SignallingWaiter],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    memory = Memory()
    memory.set("present", 1)

    class FirstArrives(signalling_waiter):  # type: ignore[valid-type,misc]
        def wait(self, timeout: float | None = None) -> Any:
            if not type(self).timeouts:
                memory.set("first", "F")  # the first missing key arrives while we wait for it
            return super().wait(timeout)

    monkeypatch.setattr(memory_module, "Waiter", FirstArrives)
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :second after 0\.05 seconds$"):
        memory.get("present", "first", "second", wait=0.05)
    assert signalling_waiter.timeouts == [0.05, 0.05]  # each missing key gets the full timeout
    assert memory.get("first") == "F"


def test_get_wait_true_is_woken_by_a_writer_thread(signalling_waiter: type[SignallingWaiter]) -> None:
    memory = Memory()
    thread, box = run_in_thread(lambda: memory.get("answer", wait=True))
    assert signalling_waiter.entered.wait(5)
    memory.set("answer", 42)
    thread.join(5)
    assert box == {"value": 42}
    assert signalling_waiter.timeouts == [None]
    assert memory._waiters == {}


def test_get_wait_several_keys_from_threads(signalling_waiter: type[SignallingWaiter]) -> None:
    memory = Memory()
    thread, box = run_in_thread(lambda: memory.get("a", "b", wait=5))
    assert signalling_waiter.entered.wait(5)
    signalling_waiter.entered.clear()
    memory["a"] = 1  # item assignment wakes waiters too
    assert signalling_waiter.entered.wait(5)
    memory.merge({"b": 2})
    thread.join(5)
    assert box == {"value": {"a": 1, "b": 2}}


def test_many_threads_wait_for_one_key() -> None:
    memory = Memory()
    barrier = threading.Barrier(4)

    def read() -> Any:
        barrier.wait(5)
        return memory.get("k", wait=5)

    runs = [run_in_thread(read) for _ in range(3)]
    barrier.wait(5)
    memory.set("k", "v")
    for thread, box in runs:
        thread.join(5)
        assert box == {"value": "v"}


def test_reserved_and_data_writes_do_not_wake_waiters() -> None:
    memory = Memory()
    memory.data["k"] = 1
    with pytest.raises(AwaitTimeout):
        memory.get("k", wait=0.01)


# ---- aget -------------------------------------------------------------------------------------


async def test_aget_waits_for_a_writer_task() -> None:
    memory = Memory()
    reader = asyncio.create_task(memory.aget("sentiment", wait=5))
    await asyncio.sleep(0)  # the reader is now waiting
    assert not reader.done()

    async def writer() -> None:
        memory.set("sentiment", {"score": 0.8})

    await asyncio.create_task(writer())
    assert await reader == {"score": 0.8}
    assert memory._waiters == {}


async def test_aget_without_wait_and_existing_keys() -> None:
    memory = Memory()
    memory.set("a", None)
    assert await memory.aget("missing") is None
    assert await memory.aget("a", wait=0.01) is None
    assert await memory.aget("a", "missing") == {"a": None, "missing": None}


async def test_aget_timeout_does_not_block_the_loop() -> None:
    memory = Memory()
    ticks: list[int] = []

    async def ticker() -> None:
        ticks.append(1)

    task = asyncio.create_task(ticker())
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :late after 0\.05 seconds$"):
        await memory.aget("late", wait=0.05)
    assert ticks == [1] and task.done()
    assert memory._waiters == {}


async def test_aget_several_keys_each_with_its_timeout() -> None:
    memory = Memory()
    reader = asyncio.create_task(memory.aget("a", "b", wait=5))
    await asyncio.sleep(0)
    memory.set("b", 2)
    await asyncio.sleep(0)
    assert not reader.done()
    memory.set("a", 1)
    assert await reader == {"a": 1, "b": 2}
    with pytest.raises(AwaitTimeout, match="^Timeout waiting for :c after 0.01 seconds$"):
        await memory.aget("a", "c", wait=0.01)


async def test_aget_woken_from_another_thread() -> None:
    memory = Memory()
    reader = asyncio.create_task(memory.aget("k", wait=True))
    await asyncio.sleep(0)
    await asyncio.to_thread(memory.set, "k", "from a thread")
    assert await asyncio.wait_for(reader, 5) == "from a thread"


async def test_aget_cancelled_removes_its_waiter() -> None:
    memory = Memory()
    reader = asyncio.create_task(memory.aget("k", wait=True))
    await asyncio.sleep(0)
    assert "k" in memory._waiters
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert memory._waiters == {}


async def test_robots_wait_for_each_other_on_one_loop() -> None:
    memory = Memory()

    async def analyst() -> None:
        topic = await memory.aget("topic", wait=5)
        memory.set("analysis", f"analysis of {topic}")

    async def writer() -> str:
        memory.set("topic", "memory")
        return str(await memory.aget("analysis", wait=5))

    _, text = await asyncio.gather(analyst(), writer())
    assert text == "analysis of memory"


async def test_blocking_get_inside_a_loop_warns() -> None:
    memory = Memory()
    with pytest.warns(RuntimeWarning, match="aget"), pytest.raises(AwaitTimeout):
        memory.get("k", wait=0.01)


# ---- subscriptions ----------------------------------------------------------------------------


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

    @memory.subscribe("a")
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
        memory.subscribe("k")("not callable")
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.subscribe_pattern("k*", None)
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.subscribe_pattern("k*", callback=42)
    with pytest.raises(ValueError, match="^Block required for subscribe_pattern$"):
        memory.subscribe_pattern("k*")(None)
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

    @memory.subscribe_pattern("k*")
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


# ---- history ----------------------------------------------------------------------------------


def test_results_history_helpers() -> None:
    memory = Memory()
    first, second = result("a"), result("b")
    assert memory.append_result(first) is memory
    memory.append_result(second.export())
    assert [r.robot_name for r in memory.results] == ["a", "b"]
    assert [r.robot_name for r in memory.results_from(1)] == ["b"]
    assert memory.results_from(2) == [] and memory.results_from(10) == []
    assert memory.set_results([second]) is memory
    assert memory.results == [second]


def test_format_history() -> None:
    greeting = TextMessage(role="user", content="hello")
    one = result("a", "first")
    memory = Memory(messages=[greeting], results=[one])
    history = memory.format_history()
    assert history == [greeting, *one.output, *one.tool_calls]
    assert memory.format_history(formatter=lambda r: [r.robot_name]) == [greeting, "a"]


# ---- serialization and copies -----------------------------------------------------------------


def test_to_dict_drops_session_id_when_none() -> None:
    memory = Memory(data={"a": 1})
    assert memory.to_dict() == {"data": {"a": 1}, "results": [], "messages": [], "custom": {}}
    one = result()
    memory = Memory(data={"a": 1}, results=[one], messages=[answer()], session_id="s")
    memory.set("k", [1, 2])
    assert memory.to_dict() == {
        "data": {"a": 1},
        "results": [one.export()],
        "messages": [answer().to_dict()],
        "session_id": "s",
        "custom": {"k": [1, 2]},
    }
    assert list(memory.to_dict()) == ["data", "results", "messages", "session_id", "custom"]
    assert json.loads(memory.to_json()) == json.loads(json.dumps(memory.to_dict()))
    assert ", " not in memory.to_json() and '": ' not in memory.to_json()


def test_from_dict_round_trip() -> None:
    one = result()
    memory = Memory(data={"a": 1}, results=[one], messages=[answer()], session_id="s")
    memory.set("k", {"x": 1})
    rebuilt = Memory.from_dict(json.loads(memory.to_json()))
    assert rebuilt.to_dict() == memory.to_dict()
    assert isinstance(rebuilt.results[0], RobotResult) and rebuilt.results[0].checksum == one.checksum
    assert isinstance(rebuilt.messages[0], Message)
    assert isinstance(rebuilt.cache, ResponseCache) and not rebuilt.is_redis
    assert Memory.from_json(memory.to_json(), network_name="n").network_name == "n"
    assert Memory.from_dict({}).to_dict() == {"data": {}, "results": [], "messages": [], "custom": {}}


def test_copy_is_deep_and_silent() -> None:
    memory = Memory(data={"nested": {"list": [1]}}, results=[result()], session_id="s", network_name="net",
                    enable_cache=False)
    memory.set("custom", {"items": [1]})
    seen: list[MemoryChange] = []
    memory.subscribe_pattern("*", callback=seen.append)
    memory.current_writer = "writer"
    clone = memory.copy()
    assert seen == []  # copying notifies nobody
    assert clone.to_dict() == memory.to_dict()
    clone.data["nested"]["list"].append(2)
    clone.get("custom")["items"].append(2)
    assert memory.data["nested"]["list"] == [1] and memory.get("custom") == {"items": [1]}
    assert clone.network_name == "net" and clone.cache is None and clone.session_id == "s"
    assert clone.current_writer is None
    assert clone.results[0] is memory.results[0]
    clone.set("custom", 2)
    assert seen == []  # subscriptions are not copied
    assert isinstance(copy.deepcopy(memory), Memory) and copy.copy(memory).get("custom") == {"items": [1]}


def test_repr() -> None:
    memory = Memory(network_name="n")
    memory.set("k", 1)
    assert repr(memory) == "<Memory backend=hash keys=['k'] network_name='n'>"


# ---- backend selection ------------------------------------------------------------------------


def test_importing_memory_never_touches_redis() -> None:
    code = "import sys, robotlab.memory; print('redis' in sys.modules)"
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert output.stdout.strip() == "False"


def test_auto_uses_a_dict_without_a_configured_url() -> None:
    assert not Memory().is_redis
    assert not Memory(backend="auto").is_redis
    assert not Memory(backend="hash").is_redis


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="Unknown memory backend: 'disk'"):
        Memory(backend="disk")  # type: ignore[arg-type]


def test_auto_falls_back_to_a_dict_when_redis_is_unreachable(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://:secret@127.0.0.1:1/0")
    with caplog.at_level(logging.WARNING, logger="robotlab.memory"):
        memory = Memory()
    assert not memory.is_redis
    assert "falls back" in caplog.text and "secret" not in caplog.text


def test_explicit_redis_that_is_unreachable_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOT_LAB_REDIS_URL", "redis://127.0.0.1:1/0")
    reload_config()
    with pytest.raises(ConfigurationError, match="Cannot use Redis at redis://127.0.0.1:1/0 for memory"):
        Memory(backend="redis")


# ---- Redis backend (the real server) ----------------------------------------------------------


def _redis_or_skip() -> Any:
    import redis

    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}: {exc}")
    return client


@pytest.fixture
def redis_client() -> Any:
    return _redis_or_skip()


@pytest.fixture
def redis_memory(redis_client: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Memory]:
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    memories: list[Memory] = []

    def make(**kwargs: Any) -> Memory:
        memory = Memory(backend="redis", **kwargs)
        memories.append(memory)
        return memory

    memory = make()
    memory.make = make  # type: ignore[attr-defined]
    yield memory
    for each in memories:
        each.clear()


def test_auto_uses_redis_when_a_url_is_configured(redis_client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REDIS_URL", REDIS_URL)
    assert Memory().is_redis
    monkeypatch.delenv("REDIS_URL")
    monkeypatch.setenv("ROBOT_LAB_REDIS_URL", REDIS_URL)
    reload_config()
    assert Memory().is_redis
    assert not Memory(backend="hash").is_redis


def test_explicit_redis_defaults_to_localhost(redis_client: Any) -> None:
    memory = Memory(backend="redis")
    assert memory.is_redis
    assert memory._backend.url == "redis://127.0.0.1:6379/0"  # type: ignore[attr-defined]


def test_redis_stores_json_under_the_namespace(redis_memory: Memory, redis_client: Any) -> None:
    namespace = redis_memory._backend.namespace  # type: ignore[attr-defined]
    assert namespace.startswith("robot_lab:memory:")
    assert str(uuid.UUID(namespace.rsplit(":", 1)[1])) == namespace.rsplit(":", 1)[1]
    redis_memory.set("sentiment", {"score": 0.8, "tags": ["a"]})
    redis_memory.set("text", "123")
    redis_memory.set("nothing", None)
    assert redis_client.get(f"{namespace}:sentiment") == '{"score":0.8,"tags":["a"]}'
    assert redis_client.get(f"{namespace}:text") == '"123"'
    assert redis_client.get(f"{namespace}:nothing") == "null"
    assert redis_memory.get("text") == "123"  # a string stays a string
    assert redis_memory.get("sentiment") == {"score": 0.8, "tags": ["a"]}
    assert redis_memory.get("nothing", wait=0.05) is None and redis_memory.has_key("nothing")
    assert redis_memory.get("missing") is None and not redis_memory.has_key("missing")
    assert redis_client.get(f"{namespace}:data") is None  # reserved keys stay in the process


def test_redis_custom_key_operations(redis_memory: Memory) -> None:
    redis_memory.set("b", 2)
    redis_memory["a"] = (1, 2)
    assert redis_memory.get("a") == [1, 2]  # JSON round trip
    assert redis_memory.keys() == ["a", "b"]
    assert redis_memory.all_keys() == [*RESERVED_KEYS, "a", "b"]
    assert redis_memory.get("a", "b", "c") == {"a": [1, 2], "b": 2, "c": None}
    assert redis_memory.delete("a") == [1, 2] and redis_memory.delete("a") is None
    assert redis_memory.to_dict()["custom"] == {"b": 2}
    redis_memory.reset()
    assert redis_memory.keys() == []
    for index in range(600):
        redis_memory.set(f"k{index}", index)
    assert len(redis_memory.keys()) == 600
    redis_memory.clear()
    assert redis_memory.keys() == []


def test_redis_values_must_be_json(redis_memory: Memory) -> None:
    with pytest.raises(TypeError, match="Cannot store 'k' in the Redis memory backend"):
        redis_memory.set("k", object())
    assert not redis_memory.has_key("k")
    redis_memory.set("result", result())  # objects with to_dict() are stored as that dict
    assert redis_memory.get("result")["robot_name"] == "helper"


def test_redis_notifications_and_previous_values(redis_memory: Memory) -> None:
    changes: list[MemoryChange] = []
    redis_memory.subscribe("k", callback=changes.append)
    redis_memory.set("k", {"v": 1})
    redis_memory.set("k", {"v": 2})
    assert [(c.value, c.previous) for c in changes] == [({"v": 1}, None), ({"v": 2}, {"v": 1})]


def test_redis_blocking_reads(redis_memory: Memory, signalling_waiter: type[SignallingWaiter]) -> None:
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :k after 0\.05 seconds$"):
        redis_memory.get("k", wait=0.05)
    thread, box = run_in_thread(lambda: redis_memory.get("k", wait=5))
    assert signalling_waiter.entered.wait(5)
    redis_memory.set("k", "v")
    thread.join(5)
    assert box == {"value": "v"}


async def test_redis_aget(redis_memory: Memory) -> None:
    reader = asyncio.create_task(redis_memory.aget("k", wait=5))
    await asyncio.sleep(0)
    await asyncio.to_thread(redis_memory.set, "k", [1])
    assert await asyncio.wait_for(reader, 5) == [1]


def test_redis_copy_and_isolation(redis_memory: Memory) -> None:
    other = redis_memory.make()  # type: ignore[attr-defined]
    redis_memory.set("k", {"a": [1]})
    assert other.get("k") is None  # each memory has its own namespace
    clone = redis_memory.copy()
    try:
        assert clone.is_redis
        assert clone._backend.namespace != redis_memory._backend.namespace  # type: ignore[attr-defined]
        assert clone.get("k") == {"a": [1]}
        clone.set("k", 2)
        assert redis_memory.get("k") == {"a": [1]}
    finally:
        clone.clear()
