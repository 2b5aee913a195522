"""MCP connections that are safe in servers and workers.

Every MCP session is *owned* by one task on a background event loop (RobotLab's shared loop, see
:mod:`robotlab._runtime`): that task enters the SDK's ``mcp.Client`` (and so its transport, its
task groups and its child process) and leaves it when the connection closes. Requests from any
thread or event loop are handed to that loop, so sync callers (Celery tasks, management
commands) and async callers (views, consumers, tests) share the same sessions.

:class:`ConnectionManager` keeps one :class:`Connection` per distinct server configuration and
counts who holds it; the last :meth:`~ConnectionManager.release` closes it. A connection that
was lost is opened again on its next request, with a short backoff. When the interpreter exits,
every session is closed and every server process stopped.

:class:`ConnectionPoller` is RobotLab's ``MCP::ConnectionPoller``: a manager with a thread and a
loop of its own, for grouping stdio clients and stopping them together.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import math
import os
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar

from .._runtime import get_loop
from ..errors import MCPError
from .server_config import IN_PROCESS, ServerConfig

__all__ = [
    "RECONNECT_ATTEMPTS",
    "RECONNECT_BACKOFF",
    "Connection",
    "ConnectionManager",
    "ConnectionPoller",
    "get_manager",
]

logger = logging.getLogger("robotlab")

T = TypeVar("T")

RECONNECT_ATTEMPTS = 3
"""How many times a lost connection is opened again before its request fails."""

RECONNECT_BACKOFF = 0.1
"""Seconds before the second attempt; doubled for each further one."""

_managers: weakref.WeakSet[ConnectionManager] = weakref.WeakSet()


def seconds(value: float) -> str:
    """A timeout as RobotLab prints it: ``15`` rather than ``15.0``."""
    return f"{value:g}"


# -- what the SDK connects to ----------------------------------------------------------------------


def _auth(provider: Callable[[], Any] | None) -> Any:
    if provider is None:
        return None
    import httpx2

    get_header = provider

    class ProviderAuth(httpx2.Auth):
        """Sets ``Authorization`` from the configured ``auth_provider`` on every request."""

        def auth_flow(self, request: Any) -> Generator[Any, Any, None]:
            value = get_header()
            if value:
                request.headers["Authorization"] = str(value)
            yield request

    return ProviderAuth()


@contextlib.asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str] | None, auth: Any) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers, auth=auth) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def _target(config: ServerConfig) -> Any:
    """What ``mcp.Client`` connects to for ``config`` (built anew for every connection)."""
    transport = config.transport
    kind = config.transport_type
    if kind == IN_PROCESS:
        return transport["server"]
    if kind == "stdio":
        from mcp import StdioServerParameters

        env = {**os.environ, **{str(k): str(v) for k, v in (transport.get("env") or {}).items()}}
        return StdioServerParameters(
            command=str(transport["command"]),
            args=[str(a) for a in transport.get("args") or []],
            env=env,
            cwd=transport.get("cwd"),
        )
    headers = {str(k): str(v) for k, v in (transport.get("headers") or {}).items()} or None
    auth = _auth(transport.get("auth_provider"))
    if kind in ("streamable-http", "http"):
        return _streamable_http(str(transport["url"]), headers, auth)
    if kind == "sse":
        from mcp.client.sse import sse_client

        return sse_client(str(transport["url"]), headers=headers, auth=auth, timeout=config.timeout)
    raise MCPError(
        f"Unsupported transport type: {kind} (the MCP SDK has no client for it; use streamable-http)"
    )


# -- errors ------------------------------------------------------------------------------------------


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def root_error(error: BaseException) -> BaseException:
    """The exception that matters inside (possibly nested) exception groups."""
    leaves = [e for e in _leaves(error) if not isinstance(e, asyncio.CancelledError)] or [error]
    for leaf in leaves:
        if isinstance(leaf, MCPError) or _sdk_code(leaf) is not None:
            return leaf
    return leaves[0]


def _sdk_code(error: BaseException) -> int | None:
    from mcp.shared.exceptions import MCPError as SDKError

    return error.code if isinstance(error, SDKError) else None


def _is_lost(error: BaseException) -> bool:
    from mcp_types import CONNECTION_CLOSED

    name = type(error).__name__
    return _sdk_code(error) == CONNECTION_CLOSED or name in {
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
        "BrokenPipeError",
    }


def _is_timeout(error: BaseException) -> bool:
    from mcp_types import REQUEST_TIMEOUT

    return isinstance(error, TimeoutError) or _sdk_code(error) == REQUEST_TIMEOUT


def connect_error(config: ServerConfig, error: BaseException) -> MCPError:
    """The :class:`MCPError` (with RobotLab's wording) for a connection that could not be made."""
    error = root_error(error)
    if isinstance(error, MCPError):
        return error
    stdio = config.transport_type == "stdio"
    if _is_timeout(error):  # before OSError: TimeoutError is one
        return MCPError(
            f"MCP server '{config.target}' did not respond within {seconds(config.timeout)}s", retryable=True
        )
    if stdio and isinstance(error, OSError) and not isinstance(error, ConnectionError):
        return MCPError(f"MCP server command not found: {config.target} ({error})")
    if stdio and _is_lost(error):
        return MCPError(f"MCP server process exited immediately (command: {config.target})")
    if _is_lost(error):
        return MCPError(f"MCP server connection lost: {error}", retryable=True)
    if _sdk_code(error) is not None:
        return MCPError(f"MCP server '{config.name}' refused the connection: {error}")
    return MCPError(
        f"Cannot connect to MCP server '{config.name}' ({config.target}): {type(error).__name__}: {error}",
        retryable=True,
    )


def request_error(config: ServerConfig, error: BaseException) -> MCPError:
    """The :class:`MCPError` for a request that failed on a live connection."""
    error = root_error(error)
    if isinstance(error, MCPError):
        return error
    if _is_timeout(error):
        return MCPError(f"MCP server did not respond within {seconds(config.timeout)}s", retryable=True)
    if _is_lost(error):
        return MCPError(f"MCP server connection lost: {error or type(error).__name__}", retryable=True)
    if _sdk_code(error) is not None:
        return MCPError(f"MCP server '{config.name}' returned an error: {error}")
    return MCPError(f"MCP request to '{config.name}' failed: {type(error).__name__}: {error}")


# -- connections -------------------------------------------------------------------------------------


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
                raise MCPError(f"Not connected to MCP server: {self.config.name}")
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
                    _target(config),
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

    async def call(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``fn(sdk_client)`` on the manager's loop; a lost connection is opened again first.

        Raises:
            MCPError: not connected, the request timed out, the connection was lost, or the
                server answered with an error.
        """
        return await self.manager.run(self._call(fn))

    async def _call(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        if self.is_closed:
            raise MCPError(f"Not connected to MCP server: {self.config.name}")
        if self._client is None:
            await self._reconnect()
        import anyio

        client = self._client
        try:
            with anyio.fail_after(self.config.timeout):  # the SDK's in-process path has no read timeout
                return await fn(client)
        except Exception as exc:
            error = request_error(self.config, exc)
            if _is_lost(root_error(exc)) and self._client is client:  # not a session opened meanwhile
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
        loop = self.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            return await coro
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on :attr:`loop` and wait for it (for synchronous callers).

        Raises:
            RuntimeError: called from :attr:`loop` itself (await instead).
        """
        loop = self.loop
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError(
                "a blocking MCP call was made on the MCP loop itself; await the async form instead"
            )
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

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


_default: ConnectionManager | None = None
_default_lock = threading.Lock()


def get_manager() -> ConnectionManager:
    """The process-wide manager, on RobotLab's shared background loop."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ConnectionManager()
        return _default


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
    """

    POLL_INTERVAL = 0.1
    """Kept from RobotLab, where a select loop woke this often; the event loop here waits on the pipes."""

    THREAD_NAME = "RobotLab::MCP::ConnectionPoller"

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._poller_loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        self._state = threading.Lock()
        self._clients: set[Any] = set()
        self._pending: set[asyncio.Future[Any]] = set()
        self._stopping = False
        super().__init__(self._require_loop)

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._poller_loop is None or not self._running:
            raise MCPError("ConnectionPoller stopped")
        return self._poller_loop

    def start(self) -> ConnectionPoller:
        """Start the thread and its loop (idempotent)."""
        with self._state:
            if self._running:
                return self
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()
                loop.close()

            self._thread = threading.Thread(target=serve, name=self.THREAD_NAME, daemon=True)
            self._thread.start()
            ready.wait()
            self._poller_loop, self._running, self._stopping = loop, True, False
        return self

    def stop(self, timeout: float = 5) -> ConnectionPoller:
        """Fail pending requests, close every session, stop the thread (idempotent)."""
        with self._state:
            if not self._running or self._poller_loop is None:
                return self
            loop = self._poller_loop

        async def shutdown() -> None:
            self._stopping = True
            for task in list(self._pending):
                task.cancel()
            await self.close_all()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout)
        with self._state:
            self._running = False
            self._clients.clear()
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout)
        self._thread = None
        return self

    @property
    def is_running(self) -> bool:
        """Whether the thread is live."""
        with self._state:
            return self._running and self._thread is not None and self._thread.is_alive()

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
                return await asyncio.wait_for(task, timeout)
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


def _close_everything() -> None:
    """At interpreter exit: close every session and stop every server process."""
    for manager in list(_managers):
        if isinstance(manager, ConnectionPoller):
            manager.stop()
            continue
        if not manager.connections:
            continue
        with contextlib.suppress(Exception):
            manager.run_sync(manager.close_all(), timeout=15)


atexit.register(_close_everything)
