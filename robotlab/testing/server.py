"""A fake OpenAI-compatible HTTP server, so tests and benchmarks run the real litellm path over real HTTP.

``FakeLLMServer`` listens on 127.0.0.1 on an ephemeral port, in its own daemon thread with its own event
loop. It speaks HTTP/1.1 with keep-alive (stdlib only) and answers ``POST /v1/chat/completions`` from a
script of steps::

    with FakeLLMServer() as server:
        server.script(reply("Hello"), tool_calls(call("get_weather", location="Paris")), reply("Done"))
        await litellm.acompletion(model="openai/gpt-4o-mini", api_base=server.base_url, api_key="sk-fake",
                                  messages=[{"role": "user", "content": "hi"}])
        assert server.requests[0]["messages"][0]["content"] == "hi"

Each request takes the first step of the script; when the script is empty it uses ``server.default``, and
with no default it answers 500 ``"fake server script exhausted"`` so a test fails loudly. A
``server.responder(body)`` callable, when set, is asked first; returning ``None`` falls back to the script.

Steps are small frozen dataclasses built by :func:`reply`, :func:`tokens`, :func:`tool_calls` (with
:func:`call`), :func:`fault`, :func:`slow_first_byte` and :func:`cut_stream`. A plain ``str`` in a script
means ``reply(str)`` and a bare ``call(...)`` means ``tool_calls(call(...))``.

When the request has ``"stream": true`` a reply is sent as Server-Sent Events, exactly as OpenAI does:
``chat.completion.chunk`` objects in a chunked HTTP body, a role delta first, content or tool-call deltas,
a chunk with the ``finish_reason``, a ``choices: []`` chunk with ``usage`` when
``stream_options.include_usage`` is true, then ``data: [DONE]``.

:class:`FakeLLMServerProcess` runs the same server in a child process (for benchmarks: its CPU then
never competes with the client for the GIL, as with a real provider on another machine).

``POST /v1/embeddings`` needs no script: every input text gets :func:`fake_embedding`, a deterministic
bag-of-words vector (texts sharing words score higher) of ``dimensions`` floats when the request
says so, base64 when ``encoding_format`` is ``"base64"``; :attr:`FakeLLMServer.embedding_requests`
has the bodies.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import json
import logging
import math
import re
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, TypeAlias

__all__ = [
    "CutStream",
    "FakeLLMServer",
    "FakeLLMServerProcess",
    "Fault",
    "Reply",
    "Responder",
    "SlowFirstByte",
    "Step",
    "ToolCall",
    "ToolCalls",
    "call",
    "cut_stream",
    "fake_embedding",
    "fault",
    "reply",
    "slow_first_byte",
    "tokens",
    "tool_calls",
]

logger = logging.getLogger(__name__)

_WORDISH = re.compile(r"\s*\S+")
_call_ids = itertools.count(1)
_response_ids = itertools.count(1)


def _pieces(text: str) -> tuple[str, ...]:
    """Split ``text`` into word-ish pieces (``"Hello", " world"``), the way tokens usually look."""
    pieces = _WORDISH.findall(text)
    rest = text[sum(map(len, pieces)) :]
    if rest:
        if pieces:
            pieces[-1] += rest
        else:
            pieces.append(rest)
    return tuple(pieces)


def _split(text: str, size: int) -> tuple[str, ...]:
    return tuple(text[i : i + size] for i in range(0, len(text), size))


# --------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Reply:
    """A text completion. Build it with :func:`reply` or :func:`tokens`."""

    text: str
    usage: tuple[int, int] | None = None
    finish_reason: str = "stop"
    chunk_size: int | None = None
    tokens_per_second: float | None = None
    pieces: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if self.tokens_per_second is not None and self.tokens_per_second <= 0:
            raise ValueError("tokens_per_second must be positive")
        pieces = _pieces(self.text) if self.chunk_size is None else _split(self.text, self.chunk_size)
        object.__setattr__(self, "pieces", pieces)


@dataclass(frozen=True)
class ToolCall:
    """One tool call inside :class:`ToolCalls`. Build it with :func:`call`."""

    name: str
    arguments: str
    id: str


@dataclass(frozen=True)
class ToolCalls:
    """An assistant message calling tools, ``finish_reason="tool_calls"``. See :func:`tool_calls`."""

    calls: tuple[ToolCall, ...]
    text: str | None = None
    usage: tuple[int, int] | None = None


@dataclass(frozen=True)
class Fault:
    """An HTTP error response with an OpenAI-style error body. Build it with :func:`fault`."""

    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SlowFirstByte:
    """Wait ``seconds`` before sending any byte of ``then``. Build it with :func:`slow_first_byte`."""

    seconds: float
    then: Step


@dataclass(frozen=True)
class CutStream:
    """Send ``then``, dropping the connection after ``after_chunks`` SSE events. See :func:`cut_stream`."""

    after_chunks: int
    then: Step
    graceful: bool = False


Step: TypeAlias = Reply | ToolCalls | Fault | SlowFirstByte | CutStream
"""One scripted answer of :class:`FakeLLMServer`."""

Responder: TypeAlias = Callable[[dict[str, Any]], "Step | str | ToolCall | None"]


def reply(
    text: str,
    *,
    usage: tuple[int, int] | None = None,
    finish_reason: str = "stop",
    chunk_size: int | None = None,
    tokens_per_second: float | None = None,
) -> Reply:
    """A text completion.

    ``usage`` is ``(input_tokens, output_tokens)``; by default it is derived from lengths (prompt characters
    / 4, and one output token per word-ish piece of ``text``). When streamed, ``text`` is sent in pieces of
    ``chunk_size`` characters (default: word-ish pieces such as ``"Hello"``, ``" world"``), one SSE event
    each, paced at ``tokens_per_second`` pieces per second when given (default: as fast as possible).
    """
    return Reply(text, usage, finish_reason, chunk_size, tokens_per_second)


def tokens(n: int, *, tokens_per_second: float | None = None, usage: tuple[int, int] | None = None) -> Reply:
    """A reply of ``n`` tokens, ``"tok0 tok1 ..."``, streamed one SSE event per token (for benchmarks)."""
    if n < 0:
        raise ValueError("n must not be negative")
    return Reply(" ".join(f"tok{i}" for i in range(n)), usage, "stop", None, tokens_per_second)


def call(
    name: str, /, *, id: str | None = None, raw_arguments: str | None = None, **arguments: Any
) -> ToolCall:
    """A tool call spec for :func:`tool_calls`: ``call("get_weather", location="Paris")``.

    The id is ``"call_<n>"`` (a process-wide counter) unless ``id=`` is given. ``raw_arguments=`` sends
    that string verbatim as the arguments instead of ``json.dumps(arguments)``: use it to send invalid JSON,
    or arguments named ``id`` or ``raw_arguments``.
    """
    if raw_arguments is not None and arguments:
        raise TypeError("call() takes either raw_arguments= or keyword arguments, not both")
    args = raw_arguments if raw_arguments is not None else json.dumps(arguments)
    return ToolCall(name, args, id if id is not None else f"call_{next(_call_ids)}")


def tool_calls(*calls: ToolCall, text: str | None = None, usage: tuple[int, int] | None = None) -> ToolCalls:
    """An assistant message with ``calls`` (and optional ``text``), ``finish_reason="tool_calls"``.

    Streamed as OpenAI does: the first delta of each call carries its index, id, ``type: "function"``, the
    function name and ``""`` arguments; the following deltas carry the arguments in several fragments.
    """
    if not calls:
        raise ValueError("tool_calls() needs at least one call(...)")
    for c in calls:
        if not isinstance(c, ToolCall):
            raise TypeError(f"tool_calls() takes call(...) values, not {type(c).__name__}")
    return ToolCalls(tuple(calls), text, usage)


_FAULTS: dict[int, tuple[str, str, str | None]] = {
    400: ("Bad request (fake server)", "invalid_request_error", None),
    401: ("Incorrect API key provided (fake server)", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to access this resource (fake server)", "invalid_request_error", None),
    404: ("The model does not exist (fake server)", "invalid_request_error", "model_not_found"),
    408: ("Request timed out (fake server)", "timeout", None),
    413: ("Request too large (fake server)", "invalid_request_error", None),
    429: ("Rate limit reached (fake server)", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request (fake server)", "server_error", None),
    502: ("Bad gateway (fake server)", "server_error", None),
    503: ("The engine is currently overloaded (fake server)", "server_error", None),
    504: ("Gateway timeout (fake server)", "server_error", None),
}


def _error_body(
    status: int, message: str | None = None, type_: str | None = None, code: str | None = None
) -> bytes:
    default_message, default_type, default_code = _FAULTS.get(
        status,
        (f"HTTP {status} (fake server)", "server_error" if status >= 500 else "invalid_request_error", None),
    )
    error = {
        "message": message if message is not None else default_message,
        "type": type_ if type_ is not None else default_type,
        "param": None,
        "code": code if code is not None else default_code,
    }
    return json.dumps({"error": error}).encode()


def fault(
    status: int,
    *,
    body: Mapping[str, Any] | str | bytes | None = None,
    message: str | None = None,
    retry_after: float | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Fault:
    """An HTTP error: ``fault(429, retry_after=1)``, ``fault(500)``.

    The body is OpenAI's ``{"error": {"message", "type", "param", "code"}}`` (``message=`` overrides the
    message), or ``body`` as given (a mapping is JSON-encoded, ``str``/``bytes`` are sent verbatim).
    ``retry_after`` becomes a ``Retry-After`` header; ``headers`` adds any others.
    """
    if not 400 <= status <= 599:
        raise ValueError("fault() status must be an HTTP error (400-599)")
    if body is None:
        raw = _error_body(status, message)
    elif isinstance(body, bytes):
        raw = body
    elif isinstance(body, str):
        raw = body.encode()
    else:
        raw = json.dumps(body).encode()
    extra: list[tuple[str, str]] = []
    if retry_after is not None:
        extra.append(("Retry-After", retry_after if isinstance(retry_after, str) else f"{retry_after:g}"))
    extra.extend((headers or {}).items())
    return Fault(status, raw, tuple(extra))


def slow_first_byte(seconds: float, then: Step | str | ToolCall) -> SlowFirstByte:
    """Wait ``seconds`` (on top of ``server.latency``) before sending any byte of ``then``."""
    if seconds < 0:
        raise ValueError("seconds must not be negative")
    return SlowFirstByte(seconds, _as_step(then))


def cut_stream(after_chunks: int, then: Step | str | ToolCall, *, graceful: bool = False) -> CutStream:
    """Stream ``then`` and drop the connection after ``after_chunks`` SSE events, with no ``[DONE]``.

    The role delta counts as the first event. By default the TCP connection is closed mid-body (the client
    sees an incomplete chunked body); with ``graceful=True`` the HTTP body ends properly but the SSE stream
    is truncated (no finish chunk, no usage, no ``[DONE]``) and the connection stays usable. On a
    non-streaming request the headers and half of the JSON body are sent, then the connection drops.
    """
    if after_chunks < 0:
        raise ValueError("after_chunks must not be negative")
    return CutStream(after_chunks, _as_step(then), graceful)


def _as_step(step: object) -> Step:
    if isinstance(step, str):
        return Reply(step)
    if isinstance(step, ToolCall):
        return ToolCalls((step,))
    if isinstance(step, Reply | ToolCalls | Fault | SlowFirstByte | CutStream):
        return step
    raise TypeError(f"not a fake server step: {step!r}")


# ------------------------------------------------------------------------------------------ rendering


def _json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    chars = 0
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str):
                chars += len(content)
            elif isinstance(content, list):
                for part in content:
                    if isinstance(part, dict) and isinstance(part.get("text"), str):
                        chars += len(part["text"])
    return max(1, chars // 4)


def _usage_json(body: Mapping[str, Any], usage: tuple[int, int] | None, output: int) -> dict[str, int]:
    prompt, completion = usage if usage is not None else (_prompt_tokens(body), output)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _argument_fragments(arguments: str) -> tuple[str, ...]:
    if not arguments:
        return ()
    return _split(arguments, max(1, min(8, -(-len(arguments) // 3))))


@dataclass(slots=True)
class _Plan:
    """How to answer one request: status, headers, then either ``body`` or a list of SSE ``events``."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes = b""
    events: list[bytes] | None = None
    interval: float = 0.0  # seconds between the text pieces of a paced stream
    paced: int = 0  # how many leading events (the role delta and the pieces) are paced
    delay: float = 0.0  # seconds before the first byte
    cut_after: int | None = None
    graceful: bool = False


_SSE_DONE = b"data: [DONE]\n\n"
_JSON_HEADERS = [("Content-Type", "application/json")]
_SSE_HEADERS = [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-cache")]


def _render(step: Step, body: Mapping[str, Any]) -> _Plan:
    delay = 0.0
    cut_after: int | None = None
    graceful = False
    while isinstance(step, SlowFirstByte | CutStream):
        if isinstance(step, SlowFirstByte):
            delay += step.seconds
        else:
            cut_after = step.after_chunks if cut_after is None else min(cut_after, step.after_chunks)
            graceful = step.graceful
        step = step.then
    if isinstance(step, Fault):
        plan = _Plan(step.status, [*_JSON_HEADERS, *step.headers], body=step.body)
    else:
        plan = _render_completion(step, body)
    plan.delay = delay
    plan.cut_after = cut_after
    plan.graceful = graceful
    return plan


def _render_completion(step: Reply | ToolCalls, body: Mapping[str, Any]) -> _Plan:
    response_id = f"chatcmpl-fake{next(_response_ids)}"
    created = int(time.time())
    model = body.get("model") if isinstance(body.get("model"), str) else "fake-model"
    if isinstance(step, Reply):
        text: str | None = step.text
        pieces = step.pieces
        finish = step.finish_reason
        calls: tuple[ToolCall, ...] = ()
        output = len(_pieces(step.text)) if step.chunk_size is not None else len(pieces)
    else:
        text = step.text
        pieces = _pieces(text) if text else ()
        finish = "tool_calls"
        calls = step.calls
        output = len(pieces) + sum(max(1, len(c.arguments) // 4) for c in calls)
    usage = _usage_json(body, step.usage, output)

    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls
            ]
        completion = {
            "id": response_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
            "usage": usage,
        }
        return _Plan(200, list(_JSON_HEADERS), body=_json(completion).encode())

    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    tail = ',"usage":null}' if include_usage else "}"
    head = (
        f'data: {{"id":"{response_id}","object":"chat.completion.chunk","created":{created},'
        f'"model":{_json(model)},"system_fingerprint":"fp_fake","choices":'
    )

    def event(delta: str, finish_reason: str | None = None) -> bytes:
        reason = "null" if finish_reason is None else _json(finish_reason)
        choices = f'[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{reason}}}]'
        return f"{head}{choices}{tail}\n\n".encode()

    events: list[bytes] = []
    if pieces or not calls:
        events.append(event('{"role":"assistant","content":"","refusal":null}'))
        content_head = '{"content":'
        events.extend(event(content_head + _json(p) + "}") for p in pieces)
    for index, c in enumerate(calls):
        first = {
            "index": index,
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": ""},
        }
        if events:
            events.append(event(_json({"tool_calls": [first]})))
        else:
            events.append(event(_json({"role": "assistant", "content": None, "tool_calls": [first]})))
        for fragment in _argument_fragments(c.arguments):
            delta = {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}
            events.append(event(_json(delta)))
    events.append(event("{}", finish))
    if include_usage:
        usage_chunk = f'{head}[],"usage":{_json(usage)}}}\n\n'
        events.append(usage_chunk.encode())
    events.append(_SSE_DONE)
    tps = step.tokens_per_second if isinstance(step, Reply) else None
    interval = 1.0 / tps if tps else 0.0
    return _Plan(200, list(_SSE_HEADERS), events=events, interval=interval, paced=1 + len(pieces))


# ---------------------------------------------------------------------------------------------- HTTP


_MODELS = _json(
    {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "robotlab-fake"}
            for name in ("gpt-4o-mini", "gpt-4o", "fake-model")
        ],
    }
).encode()
_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_MODELS_PATHS = frozenset({"/v1/models", "/models"})
_EMBEDDINGS_PATHS = frozenset({"/v1/embeddings", "/embeddings"})
_EMBEDDING_DIMENSIONS = 64
_HEAD_LIMIT = 1 << 20


class _BadRequest(Exception):
    pass


def fake_embedding(text: str, dimensions: int = _EMBEDDING_DIMENSIONS) -> list[float]:
    """The unit vector the fake server returns for ``text``: its lower-cased words hashed into
    ``dimensions`` slots (a text with no word gets the first axis)."""
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big") % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        vector[0] = norm = 1.0
    return [x / norm for x in vector]


def _embeddings_body(body: Mapping[str, Any]) -> bytes:
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise _BadRequest("'input' must be a string or a non-empty list of strings")
    dimensions = body.get("dimensions", _EMBEDDING_DIMENSIONS)
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        raise _BadRequest("'dimensions' must be a positive integer")
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector: Any = fake_embedding(text, dimensions)
        if body.get("encoding_format") == "base64":
            vector = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    tokens = sum(max(1, len(t) // 4) for t in texts)
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return _json({"object": "list", "data": data, "model": body.get("model"), "usage": usage}).encode()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise _BadRequest("malformed chunked request body")
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


class _Address:
    """What both fake servers share: where they listen, and ``with`` starting and stopping them."""

    _host: str
    _port: int | None

    def start(self) -> Any:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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

    Use it as a context manager (or call :meth:`start` / :meth:`stop`); :attr:`base_url` is the
    ``api_base`` to give litellm. Configure it from any thread: :meth:`script`, :meth:`push`,
    :attr:`default`, :attr:`latency` (seconds before each chat completion response) and :attr:`responder`.
    :attr:`requests` holds the JSON bodies received so far; :meth:`wait_for_requests` blocks until enough
    have arrived.
    """

    def __init__(
        self,
        *steps: Step | str | ToolCall,
        default: Step | str | ToolCall | None = None,
        latency: float = 0.0,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._host = host
        self._requested_port = port
        self._port: int | None = None
        self._cond = threading.Condition()
        self._script: deque[Step] = deque(_as_step(s) for s in steps)
        self._requests: list[dict[str, Any]] = []
        self._embedding_requests: list[dict[str, Any]] = []
        self._default: Step | None = None if default is None else _as_step(default)
        self.latency = latency
        self.responder = responder
        self.connection_count = 0
        """How many TCP connections were accepted (to check keep-alive reuse)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeLLMServer:
        """Start serving (idempotent) and return ``self``."""
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                self._server = loop.run_until_complete(
                    asyncio.start_server(self._handle, self._host, self._requested_port, limit=_HEAD_LIMIT)
                )
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                loop.close()
                return
            self._port = self._server.sockets[0].getsockname()[1]
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.close()

        thread = threading.Thread(target=serve, name="robotlab-fake-llm-server", daemon=True)
        thread.start()
        ready.wait()
        if failure:
            thread.join()
            raise failure[0]
        self._loop = loop
        self._thread = thread
        return self

    def stop(self) -> None:
        """Stop serving and close every connection (idempotent). The server can be started again."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        self._loop = self._thread = self._server = None
        self._port = None

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._drop_connections()

    async def _drop_connections(self) -> None:
        tasks = list(self._connections)
        for task, writer in list(self._connections.items()):
            writer.transport.abort()
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close_connections(self) -> None:
        """Drop every open connection now (idle keep-alive ones too); the server keeps listening."""
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._drop_connections(), self._loop).result(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    async def __aenter__(self) -> FakeLLMServer:
        return self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ configuration

    def script(self, *steps: Step | str | ToolCall) -> None:
        """Replace the script with ``steps``, answered one per request in order."""
        new = [_as_step(s) for s in steps]
        with self._cond:
            self._script.clear()
            self._script.extend(new)

    def push(self, step: Step | str | ToolCall) -> None:
        """Append one step to the script."""
        new = _as_step(step)
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
        self._default = None if step is None else _as_step(step)

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

    # ------------------------------------------------------------------ HTTP

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        self.connection_count += 1
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        except Exception:
            logger.exception("FakeLLMServer: unexpected error")
        finally:
            self._connections.pop(task, None)
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; return whether the connection stays open."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False  # the client closed the connection
        except asyncio.LimitOverrunError:
            await self._send(writer, 431, _JSON_HEADERS, _error_body(431, "Request headers too large"), False)
            return False
        lines = head.decode("latin-1").split("\r\n")
        while lines and not lines[0]:
            lines.pop(0)
        try:
            method, target, version = lines[0].split(" ", 2)
        except (ValueError, IndexError):
            await self._send(
                writer, 400, _JSON_HEADERS, _error_body(400, "Malformed HTTP request line"), False
            )
            return False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        http11 = version.strip().upper() == "HTTP/1.1"
        keep_alive = "close" not in connection if http11 else "keep-alive" in connection

        if headers.get("expect", "").lower() == "100-continue":
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                raw = await _read_chunked(reader)
            else:
                length = int(headers.get("content-length") or 0)
                if length < 0:
                    raise _BadRequest("negative Content-Length")
                raw = await reader.readexactly(length) if length else b""
        except (ValueError, _BadRequest) as exc:
            await self._send(writer, 400, _JSON_HEADERS, _error_body(400, f"Bad request body: {exc}"), False)
            return False

        path = target.split("?", 1)[0]
        if len(path) > 1:
            path = path.rstrip("/")
        if method == "POST" and path in _CHAT_PATHS:
            return await self._chat(raw, writer, keep_alive, http11)
        if method == "GET" and path in _MODELS_PATHS:
            return await self._send(writer, 200, _JSON_HEADERS, _MODELS, keep_alive)
        if method == "POST" and path in _EMBEDDINGS_PATHS:
            return await self._embeddings(raw, writer, keep_alive)
        body = _error_body(404, f"Unknown route: {method} {path}", "invalid_request_error", "not_found")
        return await self._send(writer, 404, _JSON_HEADERS, body, keep_alive)

    async def _chat(self, raw: bytes, writer: asyncio.StreamWriter, keep_alive: bool, http11: bool) -> bool:
        try:
            body = json.loads(raw)
        except ValueError as exc:
            message = f"We could not parse the JSON body of your request. ({exc})"
            return await self._send(writer, 400, _JSON_HEADERS, _error_body(400, message), keep_alive)
        if not isinstance(body, dict):
            message = "The JSON body of your request must be an object."
            return await self._send(writer, 400, _JSON_HEADERS, _error_body(400, message), keep_alive)

        with self._cond:
            self._requests.append(body)
            self._cond.notify_all()

        try:
            step = self._next_step(body)
        except Exception as exc:
            logger.exception("FakeLLMServer: responder raised")
            message = f"fake server responder raised {type(exc).__name__}: {exc}"
            plan = _Plan(500, list(_JSON_HEADERS), body=_error_body(500, message))
        else:
            if step is None:
                plan = _Plan(500, list(_JSON_HEADERS), body=_error_body(500, "fake server script exhausted"))
            else:
                plan = _render(step, body)

        wait = self.latency + plan.delay
        if wait > 0:
            await asyncio.sleep(wait)
        if plan.events is None:
            if plan.cut_after is not None:
                return await self._send_cut(writer, plan)
            return await self._send(writer, plan.status, plan.headers, plan.body, keep_alive)
        return await self._stream(writer, plan, keep_alive, http11)

    async def _embeddings(self, raw: bytes, writer: asyncio.StreamWriter, keep_alive: bool) -> bool:
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise _BadRequest("The JSON body of your request must be an object.")
            with self._cond:
                self._embedding_requests.append(body)
            answer = _embeddings_body(body)
        except (ValueError, _BadRequest) as exc:
            return await self._send(writer, 400, _JSON_HEADERS, _error_body(400, str(exc)), keep_alive)
        return await self._send(writer, 200, _JSON_HEADERS, answer, keep_alive)

    def _next_step(self, body: dict[str, Any]) -> Step | None:
        responder = self.responder
        if responder is not None:
            answer = responder(body)
            if answer is not None:
                return _as_step(answer)
        with self._cond:
            if self._script:
                return self._script.popleft()
        return self._default

    @staticmethod
    def _head(status: int, headers: Iterable[tuple[str, str]], keep_alive: bool) -> list[str]:
        lines = [f"HTTP/1.1 {status} {_reason(status)}"]
        lines.extend(f"{k}: {v}" for k, v in headers)
        lines.append("Connection: keep-alive" if keep_alive else "Connection: close")
        return lines

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        headers: Iterable[tuple[str, str]],
        body: bytes,
        keep_alive: bool,
    ) -> bool:
        lines = self._head(status, headers, keep_alive)
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        writer.write("\r\n".join(lines).encode("latin-1") + body)
        await writer.drain()
        return keep_alive

    async def _send_cut(self, writer: asyncio.StreamWriter, plan: _Plan) -> bool:
        lines = self._head(plan.status, plan.headers, True)
        lines.append(f"Content-Length: {len(plan.body)}\r\n\r\n")
        writer.write("\r\n".join(lines).encode("latin-1") + plan.body[: len(plan.body) // 2])
        await writer.drain()
        return False

    async def _stream(
        self, writer: asyncio.StreamWriter, plan: _Plan, keep_alive: bool, http11: bool
    ) -> bool:
        assert plan.events is not None
        chunked = http11
        if not chunked:
            keep_alive = False  # HTTP/1.0: the body ends when the connection closes
        lines = self._head(plan.status, plan.headers, keep_alive)
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

        events = plan.events
        cut = plan.cut_after is not None and plan.cut_after < len(events)
        if cut:
            events = events[: plan.cut_after]
        frames = [b"%x\r\n%b\r\n" % (len(e), e) for e in events] if chunked else list(events)
        if chunked and (not cut or plan.graceful):
            frames.append(b"0\r\n\r\n")
        if frames:
            frames[0] = head + frames[0]
        else:
            frames.append(head)
        write = writer.write
        interval = plan.interval
        if interval:
            # Paced: one event every ``interval`` seconds, on a fixed schedule so sleeps do not drift.
            loop = asyncio.get_running_loop()
            start = loop.time()
            for i, frame in enumerate(frames):
                # The role delta and the first piece go out together, then one piece per interval.
                pause = start + (min(i, plan.paced) - 1) * interval - loop.time()
                if pause > 0:
                    await writer.drain()
                    await asyncio.sleep(pause)
                if writer.is_closing():
                    return False
                write(frame)
        else:
            # As fast as possible: the first two events go out alone (time to first token), the rest in
            # batches, which saves a send() per event. The client still parses one SSE event at a time.
            write(frames[0])
            if len(frames) > 1:
                write(frames[1])
            for i in range(2, len(frames), 32):
                await writer.drain()
                if writer.is_closing():
                    return False
                write(b"".join(frames[i : i + 32]))
        await writer.drain()
        if cut and not plan.graceful:
            return False  # _handle closes the connection mid-body
        return keep_alive


# ------------------------------------------------------------------------------------- child process


def _serve_in_child(conn: Any, steps: tuple[Step, ...], options: dict[str, Any]) -> None:
    """Run a :class:`FakeLLMServer` in this (child) process until the parent says stop or goes away."""
    server = FakeLLMServer(*steps, **options)
    try:
        server.start()
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("port", server.port))
    try:
        while True:
            try:
                command = conn.recv()
            except (EOFError, OSError):
                break  # the parent went away
            if command == "requests":
                conn.send(server.requests)
            else:
                break
    finally:
        server.stop()


class FakeLLMServerProcess(_Address):
    """A :class:`FakeLLMServer` run in a child process, so its CPU never competes with the caller's GIL.

    For benchmarks: a real provider is another machine, and an in-process server thread makes the client
    wait for the GIL before each response goes out. Same wire behaviour and keyword arguments as
    :class:`FakeLLMServer`, but everything is fixed when it is built: ``steps``, ``default``, ``latency``
    and ``responder`` are pickled into the child (``multiprocessing`` "spawn"), so a responder must be a
    module-level function, and a script that starts one needs the ``if __name__ == "__main__":`` guard.
    :attr:`requests` fetches the bodies the child received so far::

        with FakeLLMServerProcess(default=reply("Hi"), latency=0.2) as server:
            await litellm.acompletion(..., api_base=server.base_url)
    """

    def __init__(
        self,
        *steps: Step | str | ToolCall,
        default: Step | str | ToolCall | None = None,
        latency: float = 0.0,
        responder: Responder | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        start_timeout: float = 30.0,
    ) -> None:
        self._steps = tuple(_as_step(s) for s in steps)
        self._options: dict[str, Any] = {
            "default": None if default is None else _as_step(default),
            "latency": latency,
            "responder": responder,
            "host": host,
            "port": port,
        }
        self._host = host
        self._start_timeout = start_timeout
        self._port: int | None = None
        self._process: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    def start(self) -> FakeLLMServerProcess:
        """Start the child process (idempotent) once it listens, and return ``self``."""
        if self._process is not None:
            return self
        import multiprocessing
        import pickle

        try:
            pickle.dumps((self._steps, self._options))
        except Exception as exc:
            raise TypeError(
                "FakeLLMServerProcess sends its steps and responder to a child process, so they must be "
                f"picklable (give a module-level function as responder, not a lambda or closure): {exc}"
            ) from exc
        context = multiprocessing.get_context("spawn")
        conn, child_conn = context.Pipe()
        process = context.Process(
            target=_serve_in_child, args=(child_conn, self._steps, self._options),
            name="robotlab-fake-llm-server", daemon=True,
        )
        process.start()
        child_conn.close()
        try:
            if not conn.poll(self._start_timeout):
                raise RuntimeError(f"FakeLLMServerProcess did not start within {self._start_timeout:g} s")
            kind, value = conn.recv()
        except (EOFError, RuntimeError) as exc:
            process.kill()
            process.join()
            conn.close()
            reason = str(exc) or "the child exited (is the main module guarded by if __name__ == '__main__'?)"
            raise RuntimeError(f"FakeLLMServerProcess failed to start: {reason}") from exc
        if kind == "error":
            process.join()
            conn.close()
            raise RuntimeError(f"FakeLLMServerProcess failed to start: {value}")
        self._process, self._conn, self._port = process, conn, value
        return self

    def stop(self) -> None:
        """Stop the child process (idempotent). The server can be started again."""
        process, conn = self._process, self._conn
        if process is None:
            return
        with self._lock, contextlib.suppress(OSError):
            conn.send("stop")
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()
        self._process = self._conn = self._port = None

    def __enter__(self) -> FakeLLMServerProcess:
        return self.start()

    @property
    def pid(self) -> int:
        """The child process id."""
        if self._process is None:
            raise RuntimeError("FakeLLMServerProcess is not running; call start() or use it as a context manager")
        return int(self._process.pid)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The chat completion request bodies the child received so far, in order (fetched over a pipe)."""
        if self._conn is None:
            raise RuntimeError("FakeLLMServerProcess is not running; call start() or use it as a context manager")
        with self._lock:
            self._conn.send("requests")
            answer: list[dict[str, Any]] = self._conn.recv()
        return answer
