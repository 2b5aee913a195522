"""What the fake server sends: OpenAI's JSON and Server-Sent Events for a step, and fake embeddings.

A streamed reply is sent exactly as OpenAI does: ``chat.completion.chunk`` objects, a role delta first,
content or tool-call deltas, a chunk with the ``finish_reason``, a ``choices: []`` chunk with ``usage`` when
``stream_options.include_usage`` is true, then ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import math
import re
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.types import Receive, Scope, Send

from .script import CutStream, Fault, Reply, SlowFirstByte, Step, ToolCall

_WORDISH = re.compile(r"\s*\S+")
_response_ids = itertools.count(1)
_SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


class Hangup(Exception):
    """Raised once a response has started, so uvicorn drops the connection mid-body (a scripted cut)."""


def dumps(obj: object) -> str:
    """Compact JSON."""
    return json.dumps(obj, separators=(",", ":"))


def word_pieces(text: str) -> list[str]:
    """Split ``text`` into word-ish pieces (``"Hello", " world"``), the way tokens usually look."""
    pieces = _WORDISH.findall(text)
    rest = text[sum(map(len, pieces)) :]
    if rest:
        pieces[-1:] = [pieces[-1] + rest] if pieces else [rest]
    return pieces


def split(text: str, size: int) -> list[str]:
    """``text`` in slices of ``size`` characters."""
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass
class Answer:
    """The ASGI answer to one request: a JSON ``body`` or SSE ``events``, delayed, paced or cut as scripted."""

    status: int
    body: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    events: list[bytes] | None = None
    interval: float = 0.0  # seconds between the text pieces of a paced stream
    paced: int = 0  # how many leading events (the role delta and the pieces) are paced
    delay: float = 0.0  # seconds before the first byte
    cut_after: int | None = None
    graceful: bool = False

    def __post_init__(self) -> None:
        """Give a JSON answer its content type and length."""
        if self.events is None:
            self.headers[:0] = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(self.body))]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Wait the delay, then send the answer; a cut raises :class:`Hangup`."""
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        cut = self.cut_after is not None and (self.events is None or self.cut_after < len(self.events))
        if self.events is None:  # JSON; a cut one sends half of it
            await send({"type": "http.response.body", "body": self.body[: len(self.body) // 2 if cut else None],
                        "more_body": cut})
        else:
            events = self.events[: self.cut_after] if cut else self.events
            if self.interval:  # the role delta and the first piece at once, then a piece every interval
                start = asyncio.get_running_loop().time()
                batches = [(start + (min(i, self.paced) - 1) * self.interval, e) for i, e in enumerate(events)]
            else:  # the first two events alone (time to first token), the rest in batches
                batches = [(0.0, b"".join(events[i : i + 32])) for i in range(2, len(events), 32)]
                batches[:0] = [(0.0, e) for e in events[:2]]
            for at, chunk in batches:
                if at:
                    await asyncio.sleep(at - asyncio.get_running_loop().time())
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if not cut or self.graceful:
                await send({"type": "http.response.body", "body": b""})
        if cut and not self.graceful:
            raise Hangup


def render(step: Step, body: Mapping[str, Any]) -> Answer:
    """The answer to request ``body`` with ``step``."""
    if isinstance(step, SlowFirstByte | CutStream):
        answer = render(step.then, body)
        if isinstance(step, SlowFirstByte):
            answer.delay += step.seconds
        else:
            inner = answer.cut_after
            answer.cut_after, answer.graceful = (step.after_chunks, step.graceful) if inner is None else (
                min(inner, step.after_chunks), answer.graceful)
        return answer
    if isinstance(step, Fault):
        return Answer(step.status, step.body, [(k.lower().encode("latin-1"), v.encode("latin-1"))
                                               for k, v in step.headers])
    response_id, created, model = f"chatcmpl-fake{next(_response_ids)}", int(time.time()), body.get("model")
    model = model if isinstance(model, str) else "fake-model"
    text, calls = (step.text, ()) if isinstance(step, Reply) else (step.text, step.calls)
    size = step.chunk_size if isinstance(step, Reply) else None
    pieces = split(text or "", size) if size else word_pieces(text or "")
    finish = step.finish_reason if isinstance(step, Reply) else "tool_calls"
    output = len(word_pieces(text or "")) + sum(max(1, len(c.arguments) // 4) for c in calls)
    prompt, completion = step.usage if step.usage is not None else (_prompt_tokens(body), output)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [_call(c) for c in calls]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return Answer(200, dumps({"id": response_id, "object": "chat.completion", "created": created, "model": model,
                                  "system_fingerprint": "fp_fake", "choices": [choice], "usage": usage}).encode())
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    head = (f'data: {{"id":"{response_id}","object":"chat.completion.chunk","created":{created},'
            f'"model":{dumps(model)},"system_fingerprint":"fp_fake","choices":')
    tail = ',"usage":null}\n\n' if include_usage else "}\n\n"

    def event(delta: str, reason: str | None = None) -> bytes:
        finish_reason = "null" if reason is None else dumps(reason)
        return f'{head}[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish_reason}}}]{tail}'.encode()

    events: list[bytes] = []
    if pieces or not calls:
        events.append(event('{"role":"assistant","content":"","refusal":null}'))
        events.extend(event('{"content":' + dumps(p) + "}") for p in pieces)
    for index, c in enumerate(calls):
        first = {"index": index, **_call(c, "")}
        events.append(event(dumps({"tool_calls": [first]} if events else {
            "role": "assistant", "content": None, "tool_calls": [first]})))
        fragments = split(c.arguments, max(1, min(8, -(-len(c.arguments) // 3))))
        events.extend(event(dumps({"tool_calls": [{"index": index, "function": {"arguments": f}}]})) for f in fragments)
    events.append(event("{}", finish))
    if include_usage:
        events.append(f'{head}[],"usage":{dumps(usage)}}}\n\n'.encode())
    events.append(b"data: [DONE]\n\n")
    tps = step.tokens_per_second if isinstance(step, Reply) else None
    return Answer(200, headers=list(_SSE_HEADERS), events=events, interval=1 / tps if tps else 0, paced=1 + len(pieces))


def _call(c: ToolCall, arguments: str | None = None) -> dict[str, Any]:
    function = {"name": c.name, "arguments": c.arguments if arguments is None else arguments}
    return {"id": c.id, "type": "function", "function": function}


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    chars = 0
    for message in body["messages"] if isinstance(body.get("messages"), list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return max(1, chars // 4)


MODELS = dumps({"object": "list", "data": [
    {"id": name, "object": "model", "created": 0, "owned_by": "robotlab-fake"}
    for name in ("gpt-4o-mini", "gpt-4o", "fake-model")
]}).encode()
"""The ``GET /v1/models`` answer."""


def fake_embedding(text: str, dimensions: int = 64) -> list[float]:
    """The unit vector the fake server returns for ``text``.

    Its lower-cased words are hashed into ``dimensions`` slots (a text with no word gets the first axis).
    """
    vector = [0.0] * dimensions
    for word in re.findall(r"\w+", text.lower()):
        vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big") % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        vector[0] = norm = 1.0
    return [x / norm for x in vector]


def embeddings(body: object) -> bytes:
    """The ``POST /v1/embeddings`` answer to ``body``; ``ValueError`` names what is wrong with it."""
    if not isinstance(body, dict):
        raise ValueError("The JSON body of your request must be an object.")
    texts = [body.get("input")] if isinstance(body.get("input"), str) else body.get("input")
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("'input' must be a string or a non-empty list of strings")
    dimensions = body.get("dimensions", 64)
    if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
        raise ValueError("'dimensions' must be a positive integer")
    data: list[dict[str, Any]] = []
    for index, text in enumerate(texts):
        vector: Any = fake_embedding(text, dimensions)
        if body.get("encoding_format") == "base64":
            vector = base64.b64encode(struct.pack(f"<{dimensions}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": vector})
    used = sum(max(1, len(t) // 4) for t in texts)
    return dumps({"object": "list", "data": data, "model": body.get("model"),
                  "usage": {"prompt_tokens": used, "total_tokens": used}}).encode()
