"""uvicorn serving an ASGI app in a daemon thread, started and stopped at once, for the fake server.

uvicorn's own main loop looks at ``should_exit`` every 0.1 s and its shutdown waits for connections to finish;
:class:`BackgroundServer` waits on events instead and drops every connection, so a stop is immediate.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable
from typing import cast

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

_STOPPING = "robotlab fake server stopping"


class Hangup(Exception):
    """Raise it once a response has started, and uvicorn drops the connection mid-body (a scripted cut)."""


def _quiet(record: logging.LogRecord) -> bool:
    """Keep scripted hang-ups, and the requests a stop cancels, out of uvicorn's error log."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, Hangup) and not (isinstance(exc, asyncio.CancelledError) and _STOPPING in exc.args)


class _State(ServerState):
    def __init__(self, on_connection: Callable[[], None]) -> None:
        super().__init__()
        self.on_connection = on_connection


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol (an HTTP/1.0 client gets a close-delimited body), counting connections."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # No Nagle delay between a head and its body (asyncio skips it: the socket's proto is 0, not TCP).
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        cast(_State, self.server_state).on_connection()


class BackgroundServer(uvicorn.Server):
    """uvicorn serving ``app`` over HTTP/1.1 (h11) in a daemon thread; ``on_connection`` is told of each one."""

    def __init__(self, app: ASGIApp, on_connection: Callable[[], None]) -> None:
        """Configure uvicorn for ``app``; nothing listens before :meth:`start_thread`."""
        super().__init__(uvicorn.Config(
            app, http=_Protocol, ws="none", lifespan="off", log_config=None, log_level="warning", access_log=False,
            proxy_headers=False, server_header=False, date_header=False, timeout_keep_alive=3600))
        self.server_state = _State(on_connection)
        self._ready, self._exit = threading.Event(), asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start_thread(self, host: str, port: int, timeout: float) -> int:
        """Listen on ``host``:``port`` (``OSError`` if taken), serve in a thread once started, return the port."""
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        port = sock.getsockname()[1]
        logging.getLogger("uvicorn.error").addFilter(_quiet)
        self._thread = threading.Thread(target=self._run, args=(sock,), name="robotlab-fake-llm-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout) or not self.started:
            self.stop_thread()
            raise RuntimeError(f"the fake server did not start on {host}:{port} within {timeout:g} s")
        return port

    def stop_thread(self) -> None:
        """Stop serving, drop every connection, and wait for the thread."""
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._exit.set)
            except RuntimeError:
                pass  # its loop is closed already
        if self._thread is not None:
            self._thread.join(timeout=5)

    def drop_connections_now(self) -> None:
        """Drop every open connection from another thread; it keeps listening."""
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._drop_connections(), self._loop).result(timeout=5)

    def _run(self, sock: socket.socket) -> None:
        try:
            self.run(sockets=[sock])
        finally:
            sock.close()
            self._ready.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """Start as uvicorn does, then tell :meth:`start_thread`."""
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets)
        self._ready.set()

    async def main_loop(self) -> None:
        """Serve until :meth:`stop_thread`."""
        await self._exit.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop listening and drop every connection at once."""
        for server in self.servers:
            server.close()
        await self._drop_connections()

    async def _drop_connections(self) -> None:
        for connection in list(self.server_state.connections):
            connection.transport.abort()
        tasks = list(self.server_state.tasks)
        for task in tasks:
            task.cancel(_STOPPING)
        await asyncio.gather(*tasks, return_exceptions=True)
