"""Background event loops that run coroutines for synchronous callers (public: hosts such as the Django app use them).

:class:`LoopThread` is the one helper for every background loop in RobotLab: an asyncio loop
served by a daemon thread, started on demand, stopped (with last work run on it) and joined.
Two use it: the shared loop behind :func:`get_loop` / :func:`run_sync` (``Robot.run``,
``Tool.call``, the MCP connection manager), so sync code (scripts, Celery tasks, management
commands) shares clients and connections that are bound to a loop and works even when called
from inside another loop; and each MCP ``ConnectionPoller``.

Why not anyio's blocking portal: ``run_sync`` is on the path of every synchronous
``robot.run``. Measured with a FakeLLM robot (5,000 runs each, interleaved, on the 2-core
development machine), a sync run took 151 us p50 handing its coroutine over with
``asyncio.run_coroutine_threadsafe`` and 203 us through ``BlockingPortal.start_task_soon``
(+52 us, +34 %; under a load average of 7.7: 359 against 435 us, +21 %): the portal wraps
every call in a task of its task group and a cancel scope. A bare hand-over of a trivial
coroutine costs 127 us one way and 183 us the other.

Fork safety: a forked child inherits the loop objects but not their threads, so a loop started
before ``fork()`` would never run a coroutine in the child (``run_sync`` hung). After a fork,
in the child, every :class:`LoopThread` forgets its loop, and the next use starts a new one.
The old loop is never touched (closing it would unregister the parent's descriptors from the
epoll instance parent and child share) and is kept referenced, so nothing of it is finalized.

At interpreter exit the shared loop is shut down while every thread still runs: litellm's cached
HTTP clients are closed on the loop that opened them and dropped, then the thread is stopped and
joined. Left to interpreter finalization, their ``__del__`` can import a module while the frozen
loop thread holds the import lock, and the process never exits.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import os
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "block_on", "get_loop", "run_on", "run_sync", "shutdown"]

T = TypeVar("T")

#: How long :func:`shutdown` waits for the loop's last work at exit.
SHUTDOWN_TIMEOUT = 5.0

_loop_threads: weakref.WeakSet[LoopThread] = weakref.WeakSet()
#: Loops (and their threads) inherited through ``fork()``: never used again, never finalized.
_inherited: list[object] = []


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def block_on(
    loop: asyncio.AbstractEventLoop,
    coro: Coroutine[Any, Any, T],
    timeout: float | None = None,
    *,
    same_loop: str = "await the coroutine instead",
) -> T:
    """Run ``coro`` on ``loop`` (served by another thread) and wait for its result or exception.

    Args:
        loop: The loop to run on.
        coro: The coroutine; it is cancelled if waiting fails (timeout, interrupt).
        timeout: Seconds to wait (``None``: no limit).
        same_loop: The error message when called from ``loop`` itself.

    Raises:
        RuntimeError: called from ``loop`` itself, which would block it forever.
        TimeoutError: ``timeout`` passed first.
    """
    if _running_loop() is loop:
        coro.close()
        raise RuntimeError(same_loop)
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result(timeout)
    except BaseException:
        future.cancel()
        raise


async def run_on(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Await ``coro`` on ``loop`` from any thread or loop (directly when already on it)."""
    if _running_loop() is loop:
        return await coro
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


class LoopThread:
    """An asyncio event loop served by a daemon thread: started on demand, stopped and joined.

    Args:
        name: The thread's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        _loop_threads.add(self)

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The running loop (``None`` before :meth:`start` and after :meth:`stop`)."""
        return self._loop

    @property
    def thread(self) -> threading.Thread | None:
        """The thread serving :attr:`loop` (``None`` when stopped)."""
        return self._thread

    @property
    def is_running(self) -> bool:
        """Whether the loop is started and its thread alive."""
        thread = self._thread
        return self._loop is not None and thread is not None and thread.is_alive()

    def start(self) -> asyncio.AbstractEventLoop:
        """Start the thread and its loop unless running (idempotent); return the loop."""
        with self._lock:
            if self._loop is not None and not self._loop.is_closed():
                return self._loop
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name=self.name, daemon=True)
            thread.start()
            ready.wait()
            self._loop, self._thread = loop, thread
            return loop

    def stop(
        self,
        timeout: float = SHUTDOWN_TIMEOUT,
        last: Callable[[], Coroutine[Any, Any, Any]] | None = None,
    ) -> None:
        """Run ``last()`` on the loop (best effort), then stop the loop, join the thread, close the loop.

        :attr:`loop` stays available while ``last()`` runs; a later :meth:`start` starts a new
        loop. Safe to call more than once.
        """
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or loop.is_closed() or not thread.is_alive():
            with self._lock:
                self._loop = self._thread = None
            return
        if last is not None:
            with contextlib.suppress(Exception):  # last work that fails must not stop the stopping
                asyncio.run_coroutine_threadsafe(last(), loop).result(timeout)
        with self._lock:
            if self._loop is loop:
                self._loop = self._thread = None
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()

    def _forget_after_fork(self) -> None:
        """In a forked child: drop the parent's loop (its thread does not exist here) untouched."""
        self._lock = threading.Lock()
        if self._loop is not None:
            _inherited.append((self._loop, self._thread))
        self._loop = self._thread = None

    def __repr__(self) -> str:
        return f"<LoopThread {self.name!r} {'running' if self.is_running else 'stopped'}>"


def _after_fork_in_child() -> None:
    for loop_thread in list(_loop_threads):
        loop_thread._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)

_shared = LoopThread("robotlab-loop")
_exit_hook_registered = False


def shared() -> LoopThread:
    """The :class:`LoopThread` behind :func:`get_loop`."""
    return _shared


def get_loop() -> asyncio.AbstractEventLoop:
    """The shared background loop, started on first use (and again after :func:`shutdown` or a fork)."""
    global _exit_hook_registered
    loop = _shared.loop
    if loop is None:
        loop = _shared.start()
        if not _exit_hook_registered:  # at first use: it runs before the exit hooks registered earlier
            _exit_hook_registered = True
            atexit.register(shutdown)
    return loop


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run ``coro`` on the shared background loop and wait for its result (or exception).

    Raises:
        RuntimeError: called from the shared loop itself (await the coroutine instead).
    """
    return block_on(
        get_loop(),
        coro,
        timeout,
        same_loop="run_sync() was called from the robotlab loop itself; await the coroutine instead",
    )


async def _close_litellm_clients() -> None:
    litellm = sys.modules.get("litellm")
    if litellm is None:
        return
    from litellm.llms.custom_httpx.async_client_cleanup import close_litellm_async_clients

    await close_litellm_async_clients()  # type: ignore[no-untyped-call]  # litellm leaves it unannotated
    litellm.in_memory_llm_clients_cache.flush_cache()


def shutdown(timeout: float = SHUTDOWN_TIMEOUT) -> None:
    """Close litellm's clients on the shared loop, stop the loop and join its thread.

    Registered with :mod:`atexit`; safe to call more than once. A later :func:`get_loop`
    starts a new loop.
    """
    if _shared.loop is None:
        return
    _shared.stop(timeout, last=_close_litellm_clients)
    gc.collect()  # finalize what the loop held now, while modules and threads are intact
