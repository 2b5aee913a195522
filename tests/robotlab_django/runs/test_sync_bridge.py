"""The sync wrappers: the coroutine on RobotLab's loop, its blocking work back in the calling thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from django.db import transaction

from robotlab.runtime import get_loop, run_sync
from robotlab_django.models import Thread
from robotlab_django.runs.sync_bridge import blocking, blocks_own_thread, call_sync


async def _where() -> tuple[asyncio.AbstractEventLoop, int, bool]:
    """The loop the coroutine runs on, the thread its blocking work ran in, and whether that thread is its own."""
    return asyncio.get_running_loop(), await blocking(threading.get_ident), blocks_own_thread()


def test_a_sync_call_runs_the_coroutine_on_robotlabs_loop_and_blocking_work_in_the_caller() -> None:
    loop, worker, own = call_sync(_where)
    assert loop is get_loop()
    assert worker == threading.get_ident() and own is True


@pytest.mark.django_db
def test_blocking_work_sees_the_callers_transaction() -> None:
    async def count_inside() -> int:
        return await blocking(Thread.objects.filter(session_id="in-the-transaction").count)

    with transaction.atomic():
        Thread.objects.create(session_id="in-the-transaction")
        assert call_sync(count_inside) == 1  # another thread's connection would not see the uncommitted row


async def test_an_async_caller_gets_djangos_thread_sensitive_executor() -> None:
    loop, worker, own = await _where()
    assert loop is asyncio.get_running_loop() and loop is not get_loop()
    assert worker != threading.get_ident() and own is False  # Django's executor is shared: never wait there


def test_errors_come_back_to_the_caller() -> None:
    async def fails() -> None:
        await blocking(int, "not a number")

    with pytest.raises(ValueError, match="invalid literal"):
        call_sync(fails)


def test_a_sync_call_from_robotlabs_loop_is_refused() -> None:
    async def nested() -> None:
        call_sync(_where)

    with pytest.raises(RuntimeError, match="_where was called synchronously from RobotLab's loop"):
        run_sync(nested())


@pytest.mark.django_db(transaction=True)
def test_a_runnable_may_do_blocking_work_while_its_sync_stream_waits_for_events() -> None:
    """The pump waits for batches in the caller's thread; blocking work of the runnable itself still gets the
    thread (within a flush interval) instead of waiting for an event that would only come after it."""
    from robotlab.streaming import Event
    from robotlab_django import services
    from robotlab_django.streaming import event_stream

    row = services.start_run("s-bridge", "echo", "hi")

    async def start(callback: Any) -> int:
        found = await blocking(Thread.objects.filter(session_id="s-bridge").count)  # before any event
        callback(Event(kind="run.started", run_id=row.run_id, seq=1, ts=0.0))
        return found

    outcome: list[int] = []
    worker = threading.Thread(target=lambda: outcome.append(event_stream.stream_run(row.thread_id, row.pk, start)),
                              daemon=True)  # a deadlock fails the test instead of hanging it
    worker.start()
    worker.join(10)
    assert outcome == [1]
