"""Waiter, blocking reads (get with wait=) and aget: robotlab.memory.waiting and the store's reads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import robotlab.memory.waiting as waiting_module
from robotlab.errors import AwaitTimeout
from robotlab.memory import TIMEOUT, Memory, Waiter
from tests.robotlab.memory.helpers import SignallingWaiter, run_in_thread

# ---- Waiter -------------------------------------------------------------------------------


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


# ---- blocking reads -----------------------------------------------------------------------


def test_get_wait_timeout_raises_with_the_key() -> None:
    memory = Memory()
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :sentiment after 0\.05 seconds$"):
        memory.get("sentiment", wait=0.05)
    assert memory._waiters.pending == {}  # the timed-out waiter is gone


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

    monkeypatch.setattr(waiting_module, "Waiter", FirstArrives)
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
    assert memory._waiters.pending == {}


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


# ---- aget ---------------------------------------------------------------------------------


async def test_aget_waits_for_a_writer_task() -> None:
    memory = Memory()
    reader = asyncio.create_task(memory.aget("sentiment", wait=5))
    await asyncio.sleep(0)  # the reader is now waiting
    assert not reader.done()

    async def writer() -> None:
        memory.set("sentiment", {"score": 0.8})

    await asyncio.create_task(writer())
    assert await reader == {"score": 0.8}
    assert memory._waiters.pending == {}


async def test_aget_without_wait_and_existing_keys() -> None:
    memory = Memory()
    memory.set("a", None)
    assert await memory.aget("missing") is None
    assert await memory.aget("a", wait=0.01) is None
    assert await memory.aget("a", "missing") == {"a": None}  # only the keys present, as get


async def test_aget_timeout_does_not_block_the_loop() -> None:
    memory = Memory()
    ticks: list[int] = []

    async def ticker() -> None:
        ticks.append(1)

    task = asyncio.create_task(ticker())
    with pytest.raises(AwaitTimeout, match=r"^Timeout waiting for :late after 0\.05 seconds$"):
        await memory.aget("late", wait=0.05)
    assert ticks == [1] and task.done()
    assert memory._waiters.pending == {}


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
    assert "k" in memory._waiters.pending
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    assert memory._waiters.pending == {}


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
