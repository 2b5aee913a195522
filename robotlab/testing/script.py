"""The fake server's script: steps, each the answer to one request, and the builders that make them.

Wherever a step is taken, a plain ``str`` means ``reply(str)`` and a ``call(...)`` means ``tool_calls(call(...))``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.client import responses
from typing import Any, TypeAlias

__all__ = [
    "CutStream", "Fault", "Reply", "Responder", "SlowFirstByte", "Step", "ToolCall", "ToolCalls", "call", "cut_stream",
    "fault", "reply", "slow_first_byte", "tokens", "tool_calls",
]

_call_ids = itertools.count(1)


@dataclass(frozen=True)
class Reply:
    """A text completion. Build it with :func:`reply` or :func:`tokens`."""

    text: str
    usage: tuple[int, int] | None = None
    finish_reason: str = "stop"
    chunk_size: int | None = None
    tokens_per_second: float | None = None

    def __post_init__(self) -> None:
        """Refuse a chunk size or a pace that cannot be streamed."""
        if self.chunk_size is not None and self.chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        if self.tokens_per_second is not None and self.tokens_per_second <= 0:
            raise ValueError("tokens_per_second must be positive")


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
"""One scripted answer of the fake server."""

Responder: TypeAlias = Callable[[dict[str, Any]], "Step | str | ToolCall | None"]
"""A function of the request body answering a step, or ``None`` to fall back to the script."""


def reply(text: str, *, usage: tuple[int, int] | None = None, finish_reason: str = "stop",
          chunk_size: int | None = None, tokens_per_second: float | None = None) -> Reply:
    """A text completion.

    ``usage`` is ``(input_tokens, output_tokens)``, by default prompt characters / 4 and one output token per
    word-ish piece of ``text``. Streamed, ``text`` is sent in pieces of ``chunk_size`` characters (default:
    word-ish pieces such as ``"Hello"``, ``" world"``), one SSE event each, at ``tokens_per_second`` if given.
    """
    return Reply(text, usage, finish_reason, chunk_size, tokens_per_second)


def tokens(n: int, *, tokens_per_second: float | None = None, usage: tuple[int, int] | None = None) -> Reply:
    """A reply of ``n`` tokens, ``"tok0 tok1 ..."``, streamed one SSE event per token (for benchmarks)."""
    if n < 0:
        raise ValueError("n must not be negative")
    return Reply(" ".join(f"tok{i}" for i in range(n)), usage, "stop", None, tokens_per_second)


def call(name: str, /, *, id: str | None = None, raw_arguments: str | None = None, **arguments: object) -> ToolCall:
    """A tool call spec for :func:`tool_calls`: ``call("get_weather", location="Paris")``.

    The id is ``"call_<n>"`` (a process-wide counter) unless ``id=`` is given. ``raw_arguments=`` sends that
    string verbatim instead of ``json.dumps(arguments)`` (invalid JSON, or arguments named ``id``).
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


_MESSAGES = {401: "Incorrect API key provided", 404: "The model does not exist", 429: "Rate limit reached",
             500: "The server had an error while processing your request", 503: "The engine is currently overloaded"}
_CODES = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}


def error_body(status: int, message: str | None = None, code: str | None = None) -> bytes:
    """OpenAI's ``{"error": {"message", "type", "param", "code"}}`` for ``status``, defaults filled in."""
    kind = {408: "timeout", 429: "requests"}.get(status, "server_error" if status >= 500 else "invalid_request_error")
    default = _MESSAGES.get(status) or responses.get(status, f"HTTP {status}")
    error = {"message": f"{default} (fake server)" if message is None else message, "type": kind, "param": None}
    return json.dumps({"error": {**error, "code": code or _CODES.get(status)}}).encode()


def fault(status: int, *, body: Mapping[str, Any] | str | bytes | None = None, message: str | None = None,
          retry_after: float | str | None = None, headers: Mapping[str, str] | None = None) -> Fault:
    """An HTTP error: ``fault(429, retry_after=1)``, ``fault(500)``.

    The body is OpenAI's ``{"error": {"message", "type", "param", "code"}}`` (``message=`` overrides the
    message), or ``body`` as given (a mapping is JSON-encoded, ``str``/``bytes`` are sent verbatim).
    ``retry_after`` becomes a ``Retry-After`` header; ``headers`` adds any others.
    """
    if not 400 <= status <= 599:
        raise ValueError("fault() status must be an HTTP error (400-599)")
    raw = json.dumps(body).encode() if isinstance(body, Mapping) else body.encode() if isinstance(body, str) else body
    wait = retry_after if isinstance(retry_after, str | None) else f"{retry_after:g}"
    extra = [] if wait is None else [("Retry-After", wait)]
    return Fault(status, error_body(status, message) if raw is None else raw, (*extra, *(headers or {}).items()))


def slow_first_byte(seconds: float, then: Step | str | ToolCall) -> SlowFirstByte:
    """Wait ``seconds`` (on top of ``server.latency``) before sending any byte of ``then``."""
    if seconds < 0:
        raise ValueError("seconds must not be negative")
    return SlowFirstByte(seconds, as_step(then))


def cut_stream(after_chunks: int, then: Step | str | ToolCall, *, graceful: bool = False) -> CutStream:
    """Stream ``then`` and drop the connection after ``after_chunks`` SSE events, with no ``[DONE]``.

    The role delta counts as the first event. By default the TCP connection is closed mid-body (the client
    sees an incomplete chunked body); with ``graceful=True`` the HTTP body ends properly but the SSE stream
    is truncated (no finish chunk, no usage, no ``[DONE]``) and the connection stays usable. On a
    non-streaming request the headers and half of the JSON body are sent, then the connection drops.
    """
    if after_chunks < 0:
        raise ValueError("after_chunks must not be negative")
    return CutStream(after_chunks, as_step(then), graceful)


def as_step(step: object) -> Step:
    """``step`` as a :data:`Step`: a ``str`` is ``reply(str)``, a ``call(...)`` is ``tool_calls(call(...))``."""
    if isinstance(step, str):
        return Reply(step)
    if isinstance(step, ToolCall):
        return ToolCalls((step,))
    if isinstance(step, Reply | ToolCalls | Fault | SlowFirstByte | CutStream):
        return step
    raise TypeError(f"not a fake server step: {step!r} (give reply(...), tool_calls(...), fault(...) or a str)")
