"""MCP connections that are safe in servers and workers: the manager that shares them.

Every MCP session is *owned* by one task on a background event loop (RobotLab's shared loop, see
:mod:`robotlab.runtime`): that task enters the SDK's ``mcp.Client`` (and so its transport, its
task groups and its child process) and leaves it when the connection closes
(:class:`~robotlab.mcp.session.Connection`). Requests from any thread or event loop are handed
to that loop, so sync callers (Celery tasks, management commands) and async callers (views,
consumers, tests) share the same sessions.

:class:`ConnectionManager` keeps one :class:`Connection` per distinct server configuration and
counts who holds it; the last :meth:`~ConnectionManager.release` closes it. A connection that
was lost is opened again on its next request, with a short backoff. When the interpreter exits,
every session is closed and every server process stopped. In a forked child (a prefork Celery
worker) every connection forgets the parent's session and opens its own on its next request.

:class:`~robotlab.mcp.poller.ConnectionPoller` is a manager with a loop of its own.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from ..runtime import block_on, get_loop, run_on
from .server_config import ServerConfig
from .session import RECONNECT_ATTEMPTS, RECONNECT_BACKOFF, Connection

__all__ = [
    "RECONNECT_ATTEMPTS",
    "RECONNECT_BACKOFF",
    "Connection",
    "ConnectionManager",
    "get_manager",
]

T = TypeVar("T")

_managers: weakref.WeakSet[ConnectionManager] = weakref.WeakSet()


class ConnectionManager:
    """Opens, shares and closes MCP connections; each session lives in one task on :attr:`loop`.

    Args:
        loop: A callable returning the event loop the sessions live on (RobotLab's shared
            background loop by default).
    """

    def __init__(self, loop: Callable[[], asyncio.AbstractEventLoop] = get_loop) -> None:
        self._loop_factory = loop
        self._lock = threading.Lock()
        self._connections: dict[tuple[Any, ...], Connection] = {}
        _managers.add(self)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop that owns the sessions."""
        return self._loop_factory()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on :attr:`loop`, from any thread or loop."""
        return await run_on(self.loop, coro)

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on :attr:`loop` and wait for it (for synchronous callers).

        Raises:
            RuntimeError: called from :attr:`loop` itself (await instead).
        """
        return block_on(
            self.loop,
            coro,
            timeout,
            same_loop="a blocking MCP call was made on the MCP loop itself; await the async form instead",
        )

    @property
    def connections(self) -> list[Connection]:
        """The open (or opening) connections."""
        with self._lock:
            return list(self._connections.values())

    async def acquire(self, config: ServerConfig) -> Connection:
        """The connection for ``config``, shared with every holder of an equal configuration.

        Raises:
            MCPError: the server could not be connected (the hold is given back).
        """
        with self._lock:
            connection = self._connections.get(config.key)
            if connection is None or connection.is_closed:
                connection = Connection(config, self)
                self._connections[config.key] = connection
            connection.leases += 1
        try:
            await connection.open()
        except BaseException:
            await self.release(connection)
            raise
        return connection

    async def release(self, connection: Connection) -> None:
        """Give a hold back; the last one closes the connection and stops its server."""
        with self._lock:
            connection.leases -= 1
            last = connection.leases <= 0
            if last and self._connections.get(connection.config.key) is connection:
                del self._connections[connection.config.key]
        if last:
            await connection.close()

    async def close_all(self) -> None:
        """Close every connection and stop every server process this manager started."""
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    def close_at_exit(self) -> None:
        """At interpreter exit: close every connection (best effort, 15 s at most)."""
        if not self.connections:
            return
        with contextlib.suppress(Exception):
            self.run_sync(self.close_all(), timeout=15)

    def forget_after_fork(self) -> None:
        """In a forked child: every connection drops the parent's session (it reconnects on use)."""
        self._lock = threading.Lock()
        for connection in self._connections.values():
            connection.forget_session()


_default: ConnectionManager | None = None
_default_lock = threading.Lock()


def get_manager() -> ConnectionManager:
    """The process-wide manager, on RobotLab's shared background loop."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ConnectionManager()
        return _default


def _close_everything() -> None:
    """At interpreter exit: close every session and stop every server process."""
    for manager in list(_managers):
        manager.close_at_exit()


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = threading.Lock()
    for manager in list(_managers):
        manager.forget_after_fork()


atexit.register(_close_everything)
os.register_at_fork(after_in_child=_after_fork_in_child)
