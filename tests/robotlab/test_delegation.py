from __future__ import annotations

import asyncio
import threading
import time
import traceback
from typing import Any

import pytest

from robotlab import errors
from robotlab.delegation import DelegationFuture, DelegationTimeout


def future() -> DelegationFuture:
    return DelegationFuture(robot_name="analyst", delegated_by="manager")


def settle_later(action: Any, delay: float = 0.05) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_attributes() -> None:
    f = future()
    assert f.robot_name == "analyst"
    assert f.delegated_by == "manager"
    assert f.is_resolved is False
    assert "analyst" in repr(f) and "pending" in repr(f)


def test_constructor_takes_keywords_only() -> None:
    with pytest.raises(TypeError):
        DelegationFuture("analyst", "manager")  # type: ignore[misc]


def test_timeout_error_is_the_shared_one() -> None:
    assert DelegationFuture.DelegationTimeout is DelegationTimeout is errors.DelegationTimeout
    assert issubclass(DelegationTimeout, errors.RobotLabError)


def test_resolve_then_value() -> None:
    f = future()
    result = object()
    f.resolve(result)
    assert f.is_resolved is True
    assert f.value() is result
    assert f.wait() is result
    assert f.value(timeout=0) is result
    assert "resolved" in repr(f)


def test_value_blocks_until_resolved_from_another_thread() -> None:
    f = future()
    settle_later(lambda: f.resolve("done"), delay=0.1)
    assert not f.is_resolved
    assert f.value(timeout=5) == "done"
    assert f.is_resolved


def test_value_without_timeout_waits_as_long_as_it_takes() -> None:
    f = future()
    thread = settle_later(lambda: f.resolve(42), delay=0.1)
    assert f.value() == 42
    thread.join(timeout=60)
    assert not thread.is_alive(), "the thread did not finish within 60 s"


def test_every_waiter_is_woken() -> None:
    f = future()
    results: list[Any] = []
    lock = threading.Lock()

    def wait() -> None:
        value = f.value(timeout=5)
        with lock:
            results.append(value)

    waiters = [threading.Thread(target=wait) for _ in range(10)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    f.resolve("shared")
    for waiter in waiters:
        waiter.join(timeout=5)
    assert results == ["shared"] * 10


@pytest.mark.parametrize(("timeout", "shown"), [(0, "0"), (0.0, "0.0"), (0.05, "0.05")])
def test_timeout_raises_delegation_timeout(timeout: float, shown: str) -> None:
    f = future()
    started = time.monotonic()
    with pytest.raises(DelegationTimeout) as caught:
        f.value(timeout=timeout)
    assert time.monotonic() - started >= timeout * 0.9
    assert str(caught.value) == f"Delegation to 'analyst' timed out after {shown}s"
    assert f.is_resolved is False


@pytest.mark.parametrize(("timeout", "shown"), [(10, "10"), (0.5, "0.5"), (30.0, "30.0")])
def test_timeout_message_renders_the_number_like_ruby(
    timeout: float, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = future()
    monkeypatch.setattr(f._condition, "wait_for", lambda predicate, timeout=None: False)
    with pytest.raises(DelegationTimeout, match=f"^Delegation to 'analyst' timed out after {shown}s$"):
        f.wait(timeout=timeout)


def test_timeout_then_late_resolution() -> None:
    f = future()
    with pytest.raises(DelegationTimeout):
        f.value(timeout=0.01)
    f.resolve("late")
    assert f.value(timeout=0.01) == "late"


def test_reject_reraises_the_error_on_every_call() -> None:
    f = future()
    error = ValueError("the analyst failed")
    try:
        raise error
    except ValueError:
        pass
    f.reject(error)
    assert f.is_resolved is True
    depths = []
    for _ in range(3):
        with pytest.raises(ValueError, match="the analyst failed") as caught:
            f.value()
        assert caught.value is error
        depths.append(len(traceback.extract_tb(caught.value.__traceback__)))
    assert depths[0] == depths[1] == depths[2]  # re-raising does not lengthen the traceback


def test_reject_from_another_thread_wakes_the_waiter() -> None:
    f = future()
    settle_later(lambda: f.reject(RuntimeError("boom")))
    with pytest.raises(RuntimeError, match="^boom$"):
        f.value(timeout=5)


def test_reject_accepts_an_exception_class() -> None:
    f = future()
    f.reject(KeyError)
    with pytest.raises(KeyError):
        f.value()


def test_reject_needs_an_exception() -> None:
    with pytest.raises(TypeError, match="^reject\\(\\) needs an exception, got str$"):
        future().reject("boom")  # type: ignore[arg-type]


def test_a_second_settle_overwrites_the_first() -> None:
    f = future()
    f.resolve("first")
    f.reject(RuntimeError("second"))
    with pytest.raises(RuntimeError, match="second"):
        f.value()
    f.resolve("third")
    assert f.value() == "third"


def test_concurrent_settles_and_waits_are_safe() -> None:
    futures = [future() for _ in range(50)]
    results: list[Any] = [None] * len(futures)

    def wait(index: int) -> None:
        results[index] = futures[index].value(timeout=10)

    waiters = [threading.Thread(target=wait, args=(i,)) for i in range(len(futures))]
    settlers = [threading.Thread(target=f.resolve, args=(i,)) for i, f in enumerate(futures)]
    for thread in waiters + settlers:
        thread.start()
    for thread in waiters + settlers:
        thread.join(timeout=10)
    assert results == list(range(len(futures)))


# --- asyncio -------------------------------------------------------------------------------------


async def test_avalue_of_a_resolved_future() -> None:
    f = future()
    f.resolve("ready")
    assert await f.avalue() == "ready"
    assert await f == "ready"


async def test_avalue_does_not_block_the_event_loop() -> None:
    f = future()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while not f.is_resolved:
            ticks += 1
            await asyncio.sleep(0.01)

    settle_later(lambda: f.resolve("from a thread"), delay=0.15)
    value, _ = await asyncio.gather(f.avalue(timeout=5), ticker())
    assert value == "from a thread"
    assert ticks >= 3
    assert f._callbacks == []


async def test_await_the_future_itself() -> None:
    f = future()
    settle_later(lambda: f.resolve("awaited"))
    assert await f == "awaited"


async def test_avalue_reraises_the_error() -> None:
    f = future()
    settle_later(lambda: f.reject(LookupError("missing")))
    with pytest.raises(LookupError, match="missing"):
        await f.avalue(timeout=5)
    with pytest.raises(LookupError):
        await f.avalue()


async def test_avalue_timeout() -> None:
    f = future()
    with pytest.raises(DelegationTimeout, match="^Delegation to 'analyst' timed out after 0.05s$"):
        await f.avalue(timeout=0.05)
    assert f._callbacks == []
    f.resolve("late")
    assert await f.avalue(timeout=0.05) == "late"


async def test_avalue_resolved_from_the_loop_itself() -> None:
    f = future()
    asyncio.get_running_loop().call_later(0.02, f.resolve, "same thread")
    assert await f.avalue(timeout=5) == "same thread"


async def test_cancelled_avalue_cleans_up() -> None:
    f = future()
    task = asyncio.ensure_future(f.avalue())
    await asyncio.sleep(0.01)
    assert len(f._callbacks) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert f._callbacks == []
    f.resolve("nobody waits")  # no error with no waiter
    assert f.value() == "nobody waits"


def test_resolve_after_an_abandoned_avalue_on_a_closed_loop() -> None:
    f = future()
    loop = asyncio.new_event_loop()
    task = loop.create_task(f.avalue())
    loop.run_until_complete(asyncio.sleep(0.01))
    assert len(f._callbacks) == 1
    task.cancel()
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass
    loop.close()
    f.resolve("fine")
    assert f.value() == "fine"
