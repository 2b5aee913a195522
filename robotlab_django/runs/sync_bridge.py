"""One async implementation, called from sync code: coroutines on RobotLab's loop, database work in the caller's thread.

The app's run path is written once, as coroutines (:func:`robotlab_django.runs.runner.aexecute`,
:func:`robotlab_django.streaming.event_stream.astream_run`). Their database work goes through :func:`blocking`:

* awaited from async code (a consumer, an async view, ``arun_robot``), it is
  ``sync_to_async(thread_sensitive=True)``, as Django expects;
* under :func:`call_sync` (the sync wrappers: ``run_robot``, ``execute_run``, the ``thread`` and
  ``sync`` executors, a Celery task) the coroutine runs on RobotLab's shared loop
  (:func:`robotlab.runtime.get_loop`, where the robot's LLM clients and MCP connections live), and
  each piece of database work runs back in the calling thread, on its connection and inside its
  transaction, through asgiref's :class:`~asgiref.current_thread_executor.CurrentThreadExecutor`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.current_thread_executor import CurrentThreadExecutor
from asgiref.sync import sync_to_async

from robotlab.runtime import get_loop

__all__ = ["blocking", "blocks_own_thread", "call_sync"]

P = ParamSpec("P")
T = TypeVar("T")

#: The caller's thread while a sync wrapper waits for its coroutine (unset in async callers).
_caller: contextvars.ContextVar[CurrentThreadExecutor | None] = contextvars.ContextVar(
    "robotlab_django_caller", default=None)


async def blocking(function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the blocking (database) ``function`` for a coroutine of the run path and await its result.

    Under :func:`call_sync` it runs in the sync caller's thread; otherwise in Django's
    thread-sensitive executor (``sync_to_async``).
    """
    caller = _caller.get()
    if caller is None:
        return await sync_to_async(function, thread_sensitive=True)(*args, **kwargs)
    return await asyncio.wrap_future(caller.submit(function, *args, **kwargs))


def blocks_own_thread() -> bool:
    """Whether :func:`blocking` work runs in a thread serving only this call, so it may wait there.

    That is a sync caller's thread, under :func:`call_sync`; ``False`` in async callers (Django's shared
    executor).
    """
    return _caller.get() is not None


def call_sync(function: Callable[P, Awaitable[T]], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the coroutine function ``function`` from sync code and return its result (or raise its error).

    The coroutine runs on RobotLab's loop; this thread serves its :func:`blocking` calls until it ends.

    Raises:
        RuntimeError: called from RobotLab's loop itself (await the coroutine there instead).
    """
    loop = get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        raise RuntimeError(f"{getattr(function, '__name__', function)} was called synchronously from RobotLab's "
                           "loop; await its async form instead")
    caller = CurrentThreadExecutor(None)

    async def main() -> T:
        _caller.set(caller)
        return await function(*args, **kwargs)

    future = asyncio.run_coroutine_threadsafe(main(), loop)
    try:
        caller.run_until_future(future)
    except BaseException:  # interrupted while serving: stop the coroutine too
        future.cancel()
        raise
    return future.result()

