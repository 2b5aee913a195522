"""A fake OpenAI-compatible server, so tests and benchmarks run the real litellm path over real HTTP.

:class:`FakeLLMServer` is a Starlette app served by uvicorn on 127.0.0.1 in a daemon thread. Each
``POST /v1/chat/completions`` takes the first step of its script (:mod:`robotlab.testing.script`, whose names
are importable from here too), else ``server.default``, else answers 500 ``"fake server script exhausted"``;
a ``server.responder(body)``, when set, is asked first (``None`` falls back to the script)::

    with FakeLLMServer(reply("Hello"), tool_calls(call("get_weather", location="Paris"))) as server:
        await litellm.acompletion(model="openai/gpt-4o-mini", api_base=server.base_url, api_key="sk-fake",
                                  messages=[{"role": "user", "content": "hi"}])
        assert server.requests[0]["messages"][0]["content"] == "hi"

``POST /v1/embeddings`` answers :func:`fake_embedding` vectors. :class:`FakeLLMServerProcess` runs the server
in a child process (for benchmarks: its CPU then never competes with the client for the GIL).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import multiprocessing
import socket
import threading
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any, Self, cast

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from . import script
from .script import *  # noqa: F403 (the script's names are importable from here)
from .script import Responder, Step, ToolCall, as_step, error_body
from .wire import MODELS, Plan, embeddings, fake_embedding, render

__all__ = ["FakeLLMServer", "FakeLLMServerProcess", "fake_embedding", *script.__all__]

logger = logging.getLogger(__name__)
_STOPPING = "robotlab fake server stopping"


class _Hangup(Exception):
    """Raised once a response has started, so that uvicorn drops the connection mid-body (a scripted cut)."""


class _QuietHangups(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _Hangup) and not (isinstance(exc, asyncio.CancelledError) and _STOPPING in exc.args)


_QUIET = _QuietHangups()


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status, media_type="application/json")


async def _not_found(request: Request, exc: Exception) -> Response:
    return _json(error_body(404, f"Unknown route: {request.method} {request.url.path}", "not_found"), 404)


class _Answer:
    """The ASGI answer of a :class:`~robotlab.testing.wire.Plan`, paced or cut short as scripted."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        plan, body = self.plan, "http.response.body"
        await send({"type": "http.response.start", "status": plan.status, "headers": plan.headers})
        if plan.events is None:  # JSON; a cut one sends half of it
            cut = plan.cut_after is not None
            await send({"type": body, "body": plan.body[: len(plan.body) // 2 if cut else None], "more_body": cut})
        else:
            cut = plan.cut_after is not None and plan.cut_after < len(plan.events)
            events = plan.events[: plan.cut_after] if cut else plan.events
            if plan.interval:  # the role delta and the first piece at once, then a piece every interval
                loop = asyncio.get_running_loop()
                start = loop.time()
                for i, event in enumerate(events):
                    await asyncio.sleep(start + (min(i, plan.paced) - 1) * plan.interval - loop.time())
                    await send({"type": body, "body": event, "more_body": True})
            else:  # the first two events alone (time to first token), the rest in batches
                for batch in [*events[:2], *(b"".join(events[i : i + 32]) for i in range(2, len(events), 32))]:
                    await send({"type": body, "body": batch, "more_body": True})
            if not cut or plan.graceful:
                await send({"type": body, "body": b""})
        if cut and not plan.graceful:
            raise _Hangup


class _State(ServerState):
    def __init__(self, on_connection: Callable[[], None]) -> None:
        super().__init__()
        self.on_connection = on_connection


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol (an HTTP/1.0 client gets a close-delimited body), counting connections."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # No Nagle delay between the head and the body (asyncio skips it: the socket's proto is 0, not TCP).
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)
        cast(_State, self.server_state).on_connection()


class _Uvicorn(uvicorn.Server):
    """uvicorn in a thread, stopped at once on an event (its own main loop polls ``should_exit`` every 0.1 s)."""

    def __init__(self, app: Starlette, sock: socket.socket, on_connection: Callable[[], None]) -> None:
        super().__init__(uvicorn.Config(
            app, http=_Protocol, ws="none", lifespan="off", log_config=None, log_level="warning", access_log=False,
            proxy_headers=False, server_header=False, date_header=False, timeout_keep_alive=3600))
        self.server_state = _State(on_connection)
        self.sock, self.ready, self.exit = sock, threading.Event(), asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None

    def run_in_thread(self) -> None:
        try:
            self.run(sockets=[self.sock])
        finally:
            self.sock.close()
            self.ready.set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets)
        self.ready.set()

    async def main_loop(self) -> None:
        await self.exit.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        await self.drop_connections()

    async def drop_connections(self) -> None:
        for connection in list(self.server_state.connections):
            connection.transport.abort()
        tasks = list(self.server_state.tasks)
        for task in tasks:
            task.cancel(_STOPPING)
        await asyncio.gather(*tasks, return_exceptions=True)


class _Address:
    """What both fake servers share: where they listen, and ``with`` starting and stopping them."""

    _host: str
    _port: int | None

    def start(self) -> Self:
        """Start serving (idempotent) and return ``self``."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop serving (idempotent); it can be started again."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port it listens on, once started."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() or use it as a context manager")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, without ``/v1``."""
        return f"http://{self._host}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: the ``api_base`` for litellm and the OpenAI SDK."""
        return f"{self.url}/v1"


class FakeLLMServer(_Address):
    """A fake OpenAI-compatible chat completions server on 127.0.0.1, run in a daemon thread.

    Configure it from any thread: :meth:`script`, :meth:`push`, :attr:`default`, :attr:`latency` (seconds
    before each chat completion response) and :attr:`responder`. :attr:`requests` holds the JSON bodies
    received so far; :meth:`wait_for_requests` blocks until enough have arrived.
    """

    def __init__(self, *steps: Step | str | ToolCall, default: Step | str | ToolCall | None = None,
                 latency: float = 0.0, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0,
                 ) -> None:
        self._host, self._requested_port, self._port = host, port, None
        self._cond = threading.Condition()
        self._script: deque[Step] = deque(as_step(s) for s in steps)
        self._requests: list[dict[str, Any]] = []
        self._embedding_requests: list[dict[str, Any]] = []
        self.default = default
        self.latency = latency
        self.responder = responder
        self.connection_count = 0
        """How many TCP connections were accepted (to check keep-alive reuse)."""
        self._uvicorn: _Uvicorn | None = None
        self._thread: threading.Thread | None = None
        endpoints = [("chat/completions", self._chat, "POST"), ("embeddings", self._embeddings, "POST"),
                     ("models", lambda request: _json(MODELS), "GET")]
        routes = [Route(f"{prefix}/{path}{slash}", endpoint, methods=[method]) for path, endpoint, method in endpoints
                  for prefix in ("/v1", "") for slash in ("", "/")]
        self._app = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _not_found})

    def start(self, timeout: float = 30.0) -> Self:
        """Start serving (idempotent) once it listens and return ``self``; ``OSError`` if the port is taken."""
        if self._thread is not None:
            return self
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server((self._host, self._requested_port), family=family)
        port = sock.getsockname()[1]
        self._uvicorn = server = _Uvicorn(self._app, sock, self._count_connection)
        logging.getLogger("uvicorn.error").addFilter(_QUIET)
        self._thread = threading.Thread(target=server.run_in_thread, name="robotlab-fake-llm-server", daemon=True)
        self._thread.start()
        if not server.ready.wait(timeout) or not server.started:
            self.stop()
            raise RuntimeError(f"FakeLLMServer did not start on {self._host}:{port} within {timeout:g} s")
        self._port = port
        return self

    def stop(self) -> None:
        """Stop serving and close every connection (idempotent). The server can be started again."""
        if self._uvicorn is not None and self._uvicorn.loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed already
                self._uvicorn.loop.call_soon_threadsafe(self._uvicorn.exit.set)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._uvicorn = self._thread = self._port = None

    def close_connections(self) -> None:
        """Drop every open connection now (idle keep-alive ones too); the server keeps listening."""
        if self._uvicorn is not None and self._uvicorn.loop is not None:
            asyncio.run_coroutine_threadsafe(self._uvicorn.drop_connections(), self._uvicorn.loop).result(timeout=5)

    def _count_connection(self) -> None:
        self.connection_count += 1

    def script(self, *steps: Step | str | ToolCall) -> None:
        """Replace the script with ``steps``, answered one per request in order."""
        new = [as_step(s) for s in steps]
        with self._cond:
            self._script.clear()
            self._script.extend(new)

    def push(self, step: Step | str | ToolCall) -> None:
        """Append one step to the script."""
        new = as_step(step)
        with self._cond:
            self._script.append(new)

    @property
    def remaining(self) -> int:
        """How many scripted steps have not been used yet."""
        with self._cond:
            return len(self._script)

    @property
    def default(self) -> Step | None:
        """The step used when the script is empty; ``None`` answers 500 ``"fake server script exhausted"``."""
        return self._default

    @default.setter
    def default(self, step: Step | str | ToolCall | None) -> None:
        self._default = None if step is None else as_step(step)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """A copy of the chat completion request bodies received so far, in order."""
        with self._cond:
            return list(self._requests)

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """A copy of the embeddings request bodies received so far, in order."""
        with self._cond:
            return list(self._embedding_requests)

    def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Block until at least ``n`` requests have arrived and return them; ``TimeoutError`` otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(f"FakeLLMServer got {len(self._requests)} request(s), expected {n}")
            return list(self._requests)

    def reset(self) -> None:
        """Forget the script and the recorded requests (``default``, ``latency`` and ``responder`` stay)."""
        with self._cond:
            self._script.clear()
            self._requests.clear()
            self._embedding_requests.clear()

    async def _chat(self, request: Request) -> Response | _Answer:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return _json(error_body(400, f"We could not parse the JSON body of your request. ({exc})"), 400)
        if not isinstance(body, dict):
            return _json(error_body(400, "The JSON body of your request must be an object."), 400)
        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()
        try:
            answer = self.responder(body) if self.responder is not None else None
            with self._cond:
                step = self._script.popleft() if answer is None and self._script else self._default
            step = as_step(answer) if answer is not None else step
        except Exception as exc:
            logger.exception("FakeLLMServer: responder raised")
            step = None
            plan = Plan.json(500, error_body(500, f"fake server responder raised {type(exc).__name__}: {exc}"))
        else:
            plan = render(step, body) if step else Plan.json(500, error_body(500, "fake server script exhausted"))
        if self.latency + plan.delay > 0:
            await asyncio.sleep(self.latency + plan.delay)
        return _Answer(plan)

    async def _embeddings(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
            if isinstance(body, dict):
                with self._cond:
                    self._embedding_requests.append(body)
            return _json(embeddings(body))
        except ValueError as exc:
            return _json(error_body(400, str(exc)), 400)


def _serve_in_child(conn: Connection, steps: tuple[Step, ...], options: dict[str, Any]) -> None:
    """Run a :class:`FakeLLMServer` in this (child) process until the parent says stop or goes away."""
    server = FakeLLMServer(*steps, **options)
    try:
        server.start()
    except BaseException as exc:
        return conn.send(("error", f"{type(exc).__name__}: {exc}"))
    conn.send(("port", server.port))
    with contextlib.suppress(EOFError, OSError):  # EOF: the parent went away
        while conn.recv() == "requests":
            conn.send(server.requests)
    server.stop()


class FakeLLMServerProcess(_Address):
    """A :class:`FakeLLMServer` run in a child process, so its CPU never competes with the caller's GIL.

    For benchmarks: a real provider is another machine. Same wire behaviour and keyword arguments as
    :class:`FakeLLMServer`, but fixed when built: the steps, ``default``, ``latency`` and ``responder`` are
    pickled into the child (``multiprocessing`` "spawn"), so a responder must be a module-level function, and
    a script starting one needs the ``if __name__ == "__main__":`` guard. :attr:`requests` asks the child.
    """

    def __init__(self, *steps: Step | str | ToolCall, default: Step | str | ToolCall | None = None,
                 latency: float = 0.0, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0,
                 start_timeout: float = 30.0) -> None:
        self._steps = tuple(as_step(s) for s in steps)
        default = None if default is None else as_step(default)
        self._options = {"default": default, "latency": latency, "responder": responder, "host": host, "port": port}
        self._host, self._start_timeout, self._port = host, start_timeout, None
        self._child: tuple[SpawnProcess, Connection] | None = None
        self._lock = threading.Lock()

    def start(self) -> Self:
        """Start the child process (idempotent) once it listens, and return ``self``."""
        if self._child is not None:
            return self
        context = multiprocessing.get_context("spawn")
        conn, child_conn = context.Pipe()
        process = context.Process(target=_serve_in_child, args=(child_conn, self._steps, self._options),
                                  name="robotlab-fake-llm-server", daemon=True)
        try:
            process.start()  # pickles the steps and the responder before the child exists
        except Exception as exc:
            conn.close()
            raise TypeError("FakeLLMServerProcess sends its steps and responder to a child process, so they must be "
                            f"picklable (give a module-level function as responder, not a lambda): {exc}") from exc
        finally:
            child_conn.close()
        try:
            kind, value = conn.recv() if conn.poll(self._start_timeout) else ("error", "no port in time")
        except EOFError:
            kind, value = "error", "the child exited (is the main module guarded by if __name__ == '__main__'?)"
        if kind == "error":
            process.kill()
            process.join()
            conn.close()
            raise RuntimeError(f"FakeLLMServerProcess failed to start: {value}")
        self._child, self._port = (process, conn), int(value)
        return self

    def stop(self) -> None:
        """Stop the child process (idempotent). The server can be started again."""
        if self._child is None:
            return
        process, conn = self._child
        with self._lock, contextlib.suppress(OSError):
            conn.send("stop")
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()
        self._child = self._port = None

    def _running(self) -> tuple[SpawnProcess, Connection]:
        if self._child is None:
            raise RuntimeError("FakeLLMServerProcess is not running; call start() or use it as a context manager")
        return self._child

    @property
    def pid(self) -> int:
        """The child process id."""
        return int(self._running()[0].pid or 0)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The chat completion request bodies the child received so far, in order (fetched over a pipe)."""
        conn = self._running()[1]
        with self._lock:
            conn.send("requests")
            answer: list[dict[str, Any]] = conn.recv()
        return answer
