"""One MCP session, owned by one task on its manager's loop, and opened again when lost.

The owner task enters the SDK's ``mcp.Client`` (and so its transport, its task groups and its
child process) and leaves it when the connection closes; requests from any thread or loop are
handed to that loop by the :class:`~robotlab.mcp.connections.ConnectionManager`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import MCPError
from .failures import connect_error, is_lost, request_error, root_error
from .server_config import ServerConfig
from .transports import sdk_target

if TYPE_CHECKING:
    from .connections import ConnectionManager

__all__ = ["RECONNECT_ATTEMPTS", "RECONNECT_BACKOFF", "Connection"]

logger = logging.getLogger("robotlab")

T = TypeVar("T")

RECONNECT_ATTEMPTS = 3
"""How many times a lost connection is opened again before its request fails."""

RECONNECT_BACKOFF = 0.1
"""Seconds before the second attempt; doubled for each further one."""

#: Session state inherited through ``fork()``: never used again, never finalized (see
#: :meth:`Connection.forget_session`).
_inherited: list[object] = []


class Connection:
    """One session with one MCP server, owned by a task on its manager's loop.

    Use it through :class:`~robotlab.mcp.MCPClient`; :meth:`call` runs a coroutine function
    on the live SDK ``mcp.Client``.
    """

    def __init__(self, config: ServerConfig, manager: ConnectionManager) -> None:
        self.config = config
        self.manager = manager
        self.is_closed = False
        self.leases = 0
        self._client: Any = None
        self._owner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def is_connected(self) -> bool:
        """Whether the session is open."""
        return self._client is not None

    @property
    def client(self) -> Any:
        """The SDK's ``mcp.Client`` (``None`` when not connected); use it only on the manager's loop."""
        return self._client

    async def open(self) -> None:
        """Connect (a no-op when connected).

        Raises:
            MCPError: the server could not be started or reached, or did not answer in time.
        """
        await self.manager.run(self._open())

    async def _open(self) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None:
                return
            if self.is_closed:
                raise MCPError(f"Not connected to MCP server: {self.config.name}", server_name=self.config.name)
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[None] = loop.create_future()
            ready.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._stop = asyncio.Event()
            self._owner = loop.create_task(
                self._own(ready, self._stop), name=f"robotlab-mcp:{self.config.name}"
            )
            try:
                await asyncio.shield(ready)
            except asyncio.CancelledError:
                await self._shutdown()
                raise

    async def _own(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """The owner task: enter the SDK client, wait for the stop signal, leave it."""
        import anyio
        from mcp import Client, Implementation

        from .. import __version__

        config = self.config
        error: BaseException | None = None
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + config.timeout) as scope:
                client = Client(
                    sdk_target(config),
                    read_timeout_seconds=config.timeout,
                    client_info=Implementation(name="RobotLab", version=__version__),
                )
                async with client:
                    scope.deadline = math.inf
                    self._client = client
                    ready.set_result(None)
                    await stop.wait()
            if scope.cancelled_caught and not ready.done():
                error = TimeoutError()
        except asyncio.CancelledError:
            error = TimeoutError()
            raise
        except BaseException as exc:  # an SDK failure arrives wrapped in exception groups
            error = exc
            if ready.done():
                logger.debug("MCP server '%s': error while closing: %r", config.name, exc)
        finally:
            self._client = None
            if not ready.done():
                ready.set_exception(connect_error(config, error or TimeoutError()))

    async def _shutdown(self) -> None:
        owner, stop = self._owner, self._stop
        self._owner = self._stop = None
        if stop is not None:
            stop.set()
        if owner is not None and not owner.done():
            with contextlib.suppress(BaseException):
                await owner

    def forget_session(self) -> None:
        """In a forked child: drop the parent's session untouched; the next request opens a new one.

        The session's task, streams and server process belong to the parent (closing them here
        would close the parent's pipes), so they are only kept referenced, never finalized.
        """
        if self._client is not None or self._owner is not None:
            _inherited.append((self._client, self._owner, self._stop, self._lock))
        self._client = self._owner = self._stop = self._lock = None

    async def call(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``fn(sdk_client)`` on the manager's loop; a lost connection is opened again first.

        Raises:
            MCPError: not connected, the request timed out, the connection was lost, or the
                server answered with an error.
        """
        return await self.manager.run(self._call(fn))

    async def _call(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        if self.is_closed:
            raise MCPError(f"Not connected to MCP server: {self.config.name}", server_name=self.config.name)
        if self._client is None:
            await self._reconnect()
        import anyio

        client = self._client
        try:
            with anyio.fail_after(self.config.timeout):  # the SDK's in-process path has no read timeout
                return await fn(client)
        except Exception as exc:
            error = request_error(self.config, exc)
            if is_lost(root_error(exc)) and self._client is client:  # not a session opened meanwhile
                await self._shutdown()
            raise error from exc

    async def _reconnect(self) -> None:
        last: MCPError | None = None
        for attempt in range(RECONNECT_ATTEMPTS):
            if attempt:
                await asyncio.sleep(RECONNECT_BACKOFF * 2 ** (attempt - 1))
            logger.info(
                "MCP server '%s': reconnecting (attempt %d of %d)",
                self.config.name,
                attempt + 1,
                RECONNECT_ATTEMPTS,
            )
            try:
                await self._open()
                return
            except MCPError as exc:
                last = exc
        assert last is not None
        raise last

    async def close(self) -> None:
        """Close the session and stop the server process; the connection cannot be used again."""
        self.is_closed = True
        await self.manager.run(self._shutdown())

    def __repr__(self) -> str:
        state = "closed" if self.is_closed else "connected" if self.is_connected else "idle"
        return f"<Connection {self.config.name!r} {state} leases={self.leases}>"
