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
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from . import script
from .script import *  # noqa: F403 (the script's names are importable from here)
from .script import Responder, Step, ToolCall, as_step, error_body
from .wire import MODELS, Answer, Hangup, embeddings, fake_embedding, render

__all__ = ["FakeLLMServer", "FakeLLMServerProcess", "fake_embedding", *script.__all__]

logger = logging.getLogger(__name__)
_STOPPING = "robotlab fake server stopping"


def _quiet(record: logging.LogRecord) -> bool:
    """Keep scripted hang-ups, and the requests a stop cancels, out of uvicorn's error log."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, Hangup) and not (isinstance(exc, asyncio.CancelledError) and _STOPPING in exc.args)


logging.getLogger("uvicorn.error").addFilter(_quiet)


class _Uvicorn(uvicorn.Server):
    """uvicorn in a daemon thread, stopped at once: its own loop polls for exit every 0.1 s and its stop waits."""

    def __init__(self, app: ASGIApp, sock: socket.socket) -> None:
        super().__init__(uvicorn.Config(
            app, interface="asgi3", http="h11", ws="none", lifespan="off", log_config=None, log_level="warning",
            access_log=False, proxy_headers=False, server_header=False, date_header=False, timeout_keep_alive=3600))
        self.ready, self.exit, self.loop = threading.Event(), asyncio.Event(), asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve_socket, args=(sock,), name="robotlab-fake-llm", daemon=True)

    def _serve_socket(self, sock: socket.socket) -> None:
        try:
            self.loop.run_until_complete(self.serve(sockets=[sock]))
        finally:
            sock.close()
            self.loop.close()
            self.ready.set()

    async def main_loop(self) -> None:
        """Serve until told to exit."""
        self.ready.set()
        await self.exit.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop listening and drop every connection."""
        for server in self.servers:
            server.close()
        await self.drop()

    async def drop(self) -> None:
        """Drop every open connection, cancelling the requests in flight."""
        for connection in list(self.server_state.connections):
            connection.transport.abort()
        for task in (tasks := list(self.server_state.tasks)):
            task.cancel(_STOPPING)
        await asyncio.gather(*tasks, return_exceptions=True)


class _Served:
    """Where a fake server listens, and ``with`` (or ``async with``) starting and stopping it."""

    _host: str
    _port: int | None = None

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


class FakeLLMServer(_Served):
    """A fake OpenAI-compatible chat completions server on 127.0.0.1, run in a daemon thread.

    Configure it from any thread: :meth:`script`, :meth:`push`, :attr:`default`, :attr:`latency` (seconds before
    each chat completion response) and :attr:`responder`. :attr:`requests` holds the JSON bodies received so far, and
    :meth:`wait_for_requests` blocks until enough have arrived.
    """

    def __init__(self, *steps: Step | str | ToolCall, default: Step | str | ToolCall | None = None,
                 latency: float = 0.0, responder: Responder | None = None, host: str = "127.0.0.1", port: int = 0,
                 ) -> None:
        """Script it with ``steps`` (and the keyword arguments); it listens once started."""
        self._host, self._requested_port = host, port
        self._server: _Uvicorn | None = None
        self._cond = threading.Condition()
        self._script: deque[Step] = deque(as_step(s) for s in steps)
        self._requests: list[dict[str, Any]] = []
        self._embedding_requests: list[dict[str, Any]] = []
        self._clients: set[tuple[str, int]] = set()
        self.default = default
        self.latency, self.responder = latency, responder
        endpoints = [("chat/completions", self._chat, "POST"), ("embeddings", self._embeddings, "POST"),
                     ("models", _models, "GET")]
        routes = [Route(f"{prefix}/{path}{slash}", endpoint, methods=[method]) for path, endpoint, method in endpoints
                  for prefix in ("/v1", "") for slash in ("", "/")]
        self._app = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _not_found})

    def start(self, timeout: float = 30.0) -> Self:
        """Start serving (idempotent) once it listens and return ``self``; ``OSError`` if the port is taken."""
        if self._server is None:
            sock = socket.create_server((self._host, self._requested_port),
                                        family=socket.AF_INET6 if ":" in self._host else socket.AF_INET)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # accepted sockets inherit it
            self._port, self._server = sock.getsockname()[1], (server := _Uvicorn(self._asgi, sock))
            server.thread.start()
            if not server.ready.wait(timeout) or not server.started:
                self.stop()
                raise RuntimeError(f"the fake server did not start on {self._host} within {timeout:g} s")
        return self

    def stop(self) -> None:
        """Stop serving and close every connection (idempotent). The server can be started again."""
        if self._server is not None:
            with contextlib.suppress(RuntimeError):  # its loop is closed already
                self._server.loop.call_soon_threadsafe(self._server.exit.set)
            self._server.thread.join(timeout=5)
        self._server = self._port = None

    def close_connections(self) -> None:
        """Drop every open connection now (idle keep-alive ones too); the server keeps listening."""
        if self._server is not None:
            asyncio.run_coroutine_threadsafe(self._server.drop(), self._server.loop).result(timeout=5)

    @property
    def default(self) -> Step | None:
        """The step used when the script is empty; ``None`` answers 500 ``"fake server script exhausted"``."""
        return self._default

    @default.setter
    def default(self, step: Step | str | ToolCall | None) -> None:
        self._default = None if step is None else as_step(step)

    @property
    def connection_count(self) -> int:
        """How many TCP connections sent a request (told apart by the client's address), to check keep-alive."""
        with self._cond:
            return len(self._clients)

    async def _asgi(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("client"):
            with self._cond:
                self._clients.add(tuple(scope["client"]))
        await self._app(scope, receive, send)

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

    async def _chat(self, request: Request) -> Response | Answer:
        try:
            body = json.loads(await request.body())
        except ValueError as exc:
            return _error(400, f"We could not parse the JSON body of your request. ({exc})")
        if not isinstance(body, dict):
            return _error(400, "The JSON body of your request must be an object.")
        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()
        try:
            found = self.responder(body) if self.responder is not None else None
            with self._cond:
                step = self._script.popleft() if found is None and self._script else self._default
            step = as_step(found) if found is not None else step
            answer = render(step, body) if step is not None else None
        except Exception as exc:
            logger.exception("FakeLLMServer: responder raised")
            return _error(500, f"fake server responder raised {type(exc).__name__}: {exc}", delay=self.latency)
        if answer is None:
            return _error(500, "fake server script exhausted", delay=self.latency)
        answer.delay += self.latency
        return answer

    async def _embeddings(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
            if isinstance(body, dict):
                with self._cond:
                    self._embedding_requests.append(body)
            return _json(embeddings(body))
        except ValueError as exc:
            return _json(error_body(400, str(exc)), 400)


def _error(status: int, message: str, delay: float = 0.0) -> Answer:
    return Answer(status, error_body(status, message), delay=delay)


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status, media_type="application/json")


async def _models(request: Request) -> Response:
    return _json(MODELS)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _json(error_body(404, f"Unknown route: {request.method} {request.url.path}", "not_found"), 404)


def _serve_in_child(conn: Connection, steps: tuple[Step, ...], options: dict[str, Any]) -> None:
    try:
        server = FakeLLMServer(*steps, **options).start()
    except BaseException as exc:
        return conn.send(f"{type(exc).__name__}: {exc}")
    conn.send(server.port)
    with contextlib.suppress(EOFError, OSError):  # EOF: the parent went away
        while conn.recv() == "requests":
            conn.send(server.requests)
    server.stop()


class FakeLLMServerProcess(_Served):
    """A :class:`FakeLLMServer` run in a child process, so its CPU never competes with the caller's GIL.

    For benchmarks: a real provider is another machine. It takes :class:`FakeLLMServer`'s arguments, pickled into
    the child when it starts (``multiprocessing`` "spawn"): a responder must be a module-level function, and a
    script starting one needs the ``if __name__ == "__main__":`` guard. :attr:`requests` asks the child.
    """

    def __init__(self, *steps: Step | str | ToolCall, start_timeout: float = 30.0, **options: Any) -> None:
        """Keep what the child gets; ``start_timeout`` bounds the wait for its port."""
        self._args, self._start_timeout = (tuple(as_step(s) for s in steps), options), start_timeout
        self._host, self._lock = options.get("host", "127.0.0.1"), threading.Lock()
        self._child: tuple[SpawnProcess, Connection] | None = None

    def start(self) -> Self:
        """Start the child process (idempotent) once it listens, and return ``self``."""
        if self._child is None:
            context = multiprocessing.get_context("spawn")
            conn, child_conn = context.Pipe()
            process = context.Process(target=_serve_in_child, args=(child_conn, *self._args), daemon=True)
            try:
                process.start()  # pickles the steps and the responder before the child exists
            except Exception as exc:
                raise TypeError("FakeLLMServerProcess sends its steps and responder to a child process, so they "
                                "must be picklable (give a module-level function as responder, not a lambda): "
                                f"{exc}") from exc
            finally:
                child_conn.close()
            try:
                answer = conn.recv() if conn.poll(self._start_timeout) else "no port in time"
            except EOFError:
                answer = "the child exited (is the main module guarded by if __name__ == '__main__'?)"
            self._child = (process, conn)
            if not isinstance(answer, int):
                self.stop()
                raise RuntimeError(f"FakeLLMServerProcess failed to start: {answer}")
            self._port = answer
        return self

    def stop(self) -> None:
        """Stop the child process (idempotent). The server can be started again."""
        if self._child is not None:
            process, conn = self._child
            with self._lock, contextlib.suppress(OSError):
                conn.send("stop")
            process.join(timeout=5)
            process.kill()
            process.join()
            conn.close()
        self._child = self._port = None

    @property
    def pid(self) -> int:
        """The child process id."""
        return int(self._running()[0].pid or 0)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The chat completion request bodies the child received so far, in order (fetched over a pipe)."""
        with self._lock:
            self._running()[1].send("requests")
            answer: list[dict[str, Any]] = self._running()[1].recv()
        return answer

    def _running(self) -> tuple[SpawnProcess, Connection]:
        if self._child is None:
            raise RuntimeError("FakeLLMServerProcess is not running; call start() or use it as a context manager")
        return self._child
