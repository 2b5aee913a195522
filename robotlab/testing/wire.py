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
from dataclasses import dataclass
from typing import Any

from starlette.types import Receive, Scope, Send

from .script import CutStream, Fault, Reply, SlowFirstByte, Step, ToolCall, ToolCalls, split, word_pieces
from .serving import Hangup

_response_ids = itertools.count(1)
JSON_HEADERS = [(b"content-type", b"application/json")]
_SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]


def dumps(obj: Any) -> str:
    """Compact JSON."""
    return json.dumps(obj, separators=(",", ":"))


@dataclass(slots=True)
class Plan:
    """How to answer one request: status, headers, then either ``body`` or a list of SSE ``events``."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    events: list[bytes] | None = None
    interval: float = 0.0  # seconds between the text pieces of a paced stream
    paced: int = 0  # how many leading events (the role delta and the pieces) are paced
    delay: float = 0.0  # seconds before the first byte
    cut_after: int | None = None
    graceful: bool = False

    @classmethod
    def json(cls, status: int, body: bytes, headers: tuple[tuple[str, str], ...] = ()) -> Plan:
        """A JSON answer, ``headers`` added."""
        extra = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        return cls(status, [*JSON_HEADERS, (b"content-length", b"%d" % len(body)), *extra], body)


class Answer:
    """The ASGI answer of a :class:`Plan`, paced or cut short as scripted."""

    def __init__(self, plan: Plan) -> None:
        """Answer with ``plan``."""
        self.plan = plan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the plan (the fake server awaited its delay); a cut raises :class:`~.serving.Hangup`."""
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
            raise Hangup


def render(step: Step, body: Mapping[str, Any]) -> Plan:
    """The plan answering request ``body`` with ``step``."""
    delay, cut_after, graceful = 0.0, None, False
    while isinstance(step, SlowFirstByte | CutStream):
        if isinstance(step, SlowFirstByte):
            delay += step.seconds
        else:
            cut_after = step.after_chunks if cut_after is None else min(cut_after, step.after_chunks)
            graceful = step.graceful
        step = step.then
    plan = Plan.json(step.status, step.body, step.headers) if isinstance(step, Fault) else _completion(step, body)
    plan.delay, plan.cut_after, plan.graceful = delay, cut_after, graceful
    return plan


def _prompt_tokens(body: Mapping[str, Any]) -> int:
    chars = 0
    messages = body.get("messages")
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p["text"]) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return max(1, chars // 4)


def _completion(step: Reply | ToolCalls, body: Mapping[str, Any]) -> Plan:
    response_id, created = f"chatcmpl-fake{next(_response_ids)}", int(time.time())
    model = body.get("model") if isinstance(body.get("model"), str) else "fake-model"
    calls: tuple[ToolCall, ...] = ()
    if isinstance(step, Reply):
        text: str | None = step.text
        pieces, finish = step.pieces, step.finish_reason
        output = len(word_pieces(step.text)) if step.chunk_size is not None else len(pieces)
    else:
        text, calls, finish = step.text, step.calls, "tool_calls"
        pieces = word_pieces(text) if text else ()
        output = len(pieces) + sum(max(1, len(c.arguments) // 4) for c in calls)
    prompt, completion = step.usage if step.usage is not None else (_prompt_tokens(body), output)
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
        return Plan.json(200, dumps({
            "id": response_id, "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": "fp_fake", "choices": [choice], "usage": usage,
        }).encode())

    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    tail = ',"usage":null}' if include_usage else "}"
    head = (
        f'data: {{"id":"{response_id}","object":"chat.completion.chunk","created":{created},'
        f'"model":{dumps(model)},"system_fingerprint":"fp_fake","choices":'
    )

    def event(delta: str, finish_reason: str | None = None) -> bytes:
        reason = "null" if finish_reason is None else dumps(finish_reason)
        return f'{head}[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{reason}}}]{tail}\n\n'.encode()

    events: list[bytes] = []
    if pieces or not calls:
        events.append(event('{"role":"assistant","content":"","refusal":null}'))
        events.extend(event('{"content":' + dumps(p) + "}") for p in pieces)
    for index, c in enumerate(calls):
        first = {"index": index, "id": c.id, "type": "function", "function": {"name": c.name, "arguments": ""}}
        events.append(event(dumps({"tool_calls": [first]} if events else {
            "role": "assistant", "content": None, "tool_calls": [first]})))
        fragments = split(c.arguments, max(1, min(8, -(-len(c.arguments) // 3)))) if c.arguments else ()
        events.extend(event(dumps({"tool_calls": [{"index": index, "function": {"arguments": f}}]})) for f in fragments)
    events.append(event("{}", finish))
    if include_usage:
        events.append(f'{head}[],"usage":{dumps(usage)}}}\n\n'.encode())
    events.append(b"data: [DONE]\n\n")
    tps = step.tokens_per_second if isinstance(step, Reply) else None
    return Plan(200, list(_SSE_HEADERS), events=events, interval=1.0 / tps if tps else 0.0, paced=1 + len(pieces))


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
    usage = {"prompt_tokens": used, "total_tokens": used}
    return dumps({"object": "list", "data": data, "model": body.get("model"), "usage": usage}).encode()
