"""The sync wrappers: the coroutine on RobotLab's loop, its blocking work back in the calling thread."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import transaction

from robotlab._runtime import get_loop, run_sync
from robotlab_django.models import Thread
from robotlab_django.sync_bridge import blocking, blocks_own_thread, call_sync


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
