"""ConnectionPoller: RobotLab's ``MCP::ConnectionPoller``, a connection manager with its own loop thread.

It groups stdio clients and stops them together; raw JSON-RPC requests can be sent on a
registered client's session with a timeout of their own.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ..errors import MCPError
from ..runtime import LoopThread
from .connections import ConnectionManager
from .failures import seconds
from .server_config import ServerConfig

__all__ = ["ConnectionPoller"]


class ConnectionPoller(ConnectionManager):
    """A manager with its own thread (``RobotLab::MCP::ConnectionPoller``) and event loop.

    Pass it as ``MCPClient(config, poller=poller)``: stdio clients keep their sessions on the
    poller's loop, where one selector waits on every server's pipes; other clients ignore it.
    :meth:`stop` fails pending requests with ``MCPError("ConnectionPoller stopped")`` and stops
    the servers::

        poller = ConnectionPoller().start()
        client = MCPClient(config, poller=poller).connect()
        ...
        poller.stop()

    In a forked child a poller started in the parent is stopped; :meth:`start` it again there.
    """

    POLL_INTERVAL = 0.1
    """Kept from RobotLab, where a select loop woke this often; the event loop here waits on the pipes."""

    THREAD_NAME = "RobotLab::MCP::ConnectionPoller"

    def __init__(self) -> None:
        self._loop_thread = LoopThread(self.THREAD_NAME)
        self._state = threading.Lock()
        self._clients: set[Any] = set()
        self._pending: set[asyncio.Future[Any]] = set()
        self._stopping = False
        super().__init__(self._require_loop)

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop_thread.loop
        if loop is None:
            raise MCPError("ConnectionPoller stopped")
        return loop

    @property
    def thread(self) -> threading.Thread | None:
        """The poller's thread (``None`` when stopped)."""
        return self._loop_thread.thread

    def start(self) -> ConnectionPoller:
        """Start the thread and its loop (idempotent)."""
        with self._state:
            if self._loop_thread.loop is None:
                self._loop_thread.start()
                self._stopping = False
        return self

    def stop(self, timeout: float = 5) -> ConnectionPoller:
        """Fail pending requests, close every session, stop the thread (idempotent)."""

        async def shutdown() -> None:
            self._stopping = True
            for task in list(self._pending):
                task.cancel()
            await self.close_all()

        if self._loop_thread.loop is None:
            return self
        self._loop_thread.stop(timeout, last=shutdown)
        with self._state:
            self._clients.clear()
        return self

    def close_at_exit(self) -> None:
        """At interpreter exit: :meth:`stop`."""
        self.stop()

    def forget_after_fork(self) -> None:
        """In a forked child: the parent's pending requests and clients are not this process's."""
        self._state = threading.Lock()
        self._pending = set()
        self._clients = set()
        super().forget_after_fork()

    @property
    def is_running(self) -> bool:
        """Whether the thread is live."""
        return self._loop_thread.is_running

    @staticmethod
    def _is_stdio(client: Any) -> bool:
        server = getattr(client, "server", None)
        return isinstance(server, ServerConfig) and server.transport_type == "stdio"

    def register(self, client: Any) -> None:
        """Group a stdio client with this poller; any other client is ignored silently."""
        if self._is_stdio(client):
            with self._state:
                self._clients.add(client)

    def unregister(self, client: Any) -> None:
        """Forget a client (a no-op for clients that were never registered)."""
        with self._state:
            self._clients.discard(client)

    @property
    def clients(self) -> list[Any]:
        """The registered clients."""
        with self._state:
            return list(self._clients)

    async def asend_request(self, client: Any, message: dict[str, Any], *, timeout: float) -> Any:
        """Send a JSON-RPC request (``{"method": ..., "params": ...}``) on ``client``'s session.

        Returns the request's result.

        Raises:
            MCPError: ``"MCP server did not respond within Ns"`` (retryable) on timeout,
                ``"MCP connection lost: ..."`` (retryable) when the session is gone,
                ``"ConnectionPoller stopped"`` when :meth:`stop` ran meanwhile, or the server's error.
        """

        async def send() -> Any:
            task = asyncio.ensure_future(client._raw_request(message))
            self._pending.add(task)
            try:
                async with asyncio.timeout(timeout):
                    return await task
            except TimeoutError:
                raise MCPError(
                    f"MCP server did not respond within {seconds(timeout)}s", retryable=True
                ) from None
            except asyncio.CancelledError:
                if self._stopping:
                    raise MCPError("ConnectionPoller stopped") from None
                raise
            except MCPError as exc:
                lost = "MCP server connection lost: "
                if str(exc).startswith(lost):
                    raise MCPError(f"MCP connection lost: {str(exc)[len(lost) :]}", retryable=True) from exc
                raise
            finally:
                self._pending.discard(task)

        return await self.run(send())

    def send_request(self, client: Any, message: dict[str, Any], *, timeout: float) -> Any:
        """Blocking :meth:`asend_request`."""
        return self.run_sync(self.asend_request(client, message, timeout=timeout))
