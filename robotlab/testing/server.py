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
import threading
from collections import deque
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnProcess
from typing import Any, Self

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import script
from .script import *  # noqa: F403 (the script's names are importable from here)
from .script import Responder, Step, ToolCall, as_step, error_body
from .serving import BackgroundServer
from .wire import MODELS, Answer, Plan, embeddings, fake_embedding, render

__all__ = ["FakeLLMServer", "FakeLLMServerProcess", "fake_embedding", *script.__all__]

logger = logging.getLogger(__name__)


def _json(body: bytes, status: int = 200) -> Response:
    return Response(body, status, media_type="application/json")


async def _not_found(request: Request, exc: Exception) -> Response:
    return _json(error_body(404, f"Unknown route: {request.method} {request.url.path}", "not_found"), 404)


async def _models(request: Request) -> Response:
    return _json(MODELS)


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
        """Script it with ``steps`` (and the keyword arguments); it listens once started."""
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
        self._server: BackgroundServer | None = None
        endpoints = [("chat/completions", self._chat, "POST"), ("embeddings", self._embeddings, "POST"),
                     ("models", _models, "GET")]
        routes = [Route(f"{prefix}/{path}{slash}", endpoint, methods=[method]) for path, endpoint, method in endpoints
                  for prefix in ("/v1", "") for slash in ("", "/")]
        self._app = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _not_found})

    def start(self, timeout: float = 30.0) -> Self:
        """Start serving (idempotent) once it listens and return ``self``; ``OSError`` if the port is taken."""
        if self._server is None:
            server = BackgroundServer(self._app, self._count_connection)
            self._port = server.start_thread(self._host, self._requested_port, timeout)
            self._server = server
        return self

    def stop(self) -> None:
        """Stop serving and close every connection (idempotent). The server can be started again."""
        if self._server is not None:
            self._server.stop_thread()
        self._server = self._port = None

    def close_connections(self) -> None:
        """Drop every open connection now (idle keep-alive ones too); the server keeps listening."""
        if self._server is not None:
            self._server.drop_connections_now()

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

    async def _chat(self, request: Request) -> Response | Answer:
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
        return Answer(plan)

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
        """Keep everything the child gets when it starts; ``start_timeout`` bounds the wait for its port."""
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
