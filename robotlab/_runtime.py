"""A background event loop that runs coroutines for synchronous callers.

``Robot.run``, ``Tool.call`` and the MCP connection manager use one long-lived loop in a
daemon thread, so sync code (scripts, Celery tasks, management commands) shares clients and
connections that are bound to a loop, and works even when called from inside another loop.

At interpreter exit the loop is shut down while every thread still runs: litellm's cached HTTP clients
are closed on the loop that opened them and dropped, then the thread is stopped and joined. Left to
interpreter finalization, their ``__del__`` can import a module while the frozen loop thread holds the
import lock, and the process never exits.
"""

from __future__ import annotations

import asyncio
import atexit
import gc
import sys
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["get_loop", "run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
#: How long :func:`shutdown` waits for the loop's last work at exit.
SHUTDOWN_TIMEOUT = 5.0


def get_loop() -> asyncio.AbstractEventLoop:
    """The shared background loop, started on first use."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name="robotlab-loop", daemon=True)
            thread.start()
            ready.wait()
            if _thread is None:
                atexit.register(shutdown)
            _loop, _thread = loop, thread
        return _loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the background loop and wait for its result (or exception)."""
    loop = get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("run_sync() was called from the robotlab loop itself; await the coroutine instead")
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except BaseException:
        future.cancel()
        raise


async def _close_litellm_clients() -> None:
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

    await close_litellm_async_clients()
    litellm.in_memory_llm_clients_cache.flush_cache()


def shutdown(timeout: float = SHUTDOWN_TIMEOUT) -> None:
    """Close litellm's clients on the background loop, stop the loop and join its thread.

    Registered with :mod:`atexit` when the loop starts; safe to call more than once. A later
    :func:`get_loop` starts a new loop.
    """
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop = None
    if loop is None or loop.is_closed() or thread is None or not thread.is_alive():
        return
    try:
        asyncio.run_coroutine_threadsafe(_close_litellm_clients(), loop).result(timeout)
    except Exception:  # noqa: BLE001 - best effort at exit: a client that will not close must not block it
        pass
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout)
    if not thread.is_alive():
        loop.close()
    gc.collect()  # finalize what the loop held now, while modules and threads are intact
