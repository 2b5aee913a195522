"""FakeLLMServer driven by the real litellm over real HTTP, plus raw HTTP checks of the wire format.

Why not VCR: these tests are about the fake server itself (the wire format litellm parses, faults,
timing), so they need a live socket rather than recorded cassettes.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no internet: don't fetch the price map

import base64
import http.client
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from litellm.exceptions import MidStreamFallbackError

from robotlab.testing.server import (
    CutStream,
    FakeLLMServer,
    FakeLLMServerProcess,
    Fault,
    Reply,
    SlowFirstByte,
    ToolCall,
    ToolCalls,
    call,
    cut_stream,
    fake_embedding,
    fault,
    reply,
    slow_first_byte,
    tokens,
    tool_calls,
)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string"}},
            "required": ["location"],
        },
    },
}


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """litellm's async transport: aiohttp (its default) or plain httpx."""
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", request.param == "httpx")
    return str(request.param)


def ask(server: FakeLLMServer, content: str = "hi", **kwargs: Any) -> dict[str, Any]:
    return {
        "model": "openai/gpt-4o-mini",
        "api_base": server.base_url,
        "api_key": "sk-fake",
        "messages": [{"role": "user", "content": content}],
        **kwargs,
    }


def deltas(chunks: list[Any]) -> list[str | None]:
    return [c.choices[0].delta.content for c in chunks if c.choices]


# --------------------------------------------------------------------------------------- text


def test_completion_returns_text_and_usage(server: FakeLLMServer) -> None:
    server.script(reply("Hello there", usage=(12, 3)))

    response = litellm.completion(**ask(server, "Say hello"))

    assert response.choices[0].message.content == "Hello there"
    assert response.choices[0].finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (12, 3)
    assert response.usage.total_tokens == 15
    [body] = server.requests
    assert body["model"] == "gpt-4o-mini"
    assert body["messages"] == [{"role": "user", "content": "Say hello"}]


def test_default_usage_is_derived_from_lengths(server: FakeLLMServer) -> None:
    server.script(reply("one two three"))

    response = litellm.completion(**ask(server, "x" * 40))

    assert response.usage.prompt_tokens == 10  # 40 characters / 4
    assert response.usage.completion_tokens == 3  # three word-ish pieces


async def test_acompletion_reuses_one_keep_alive_connection(server: FakeLLMServer, transport: str) -> None:
    server.script(reply("first"), reply("second"), reply("third"))

    texts = [(await litellm.acompletion(**ask(server))).choices[0].message.content for _ in range(3)]

    assert texts == ["first", "second", "third"]
    assert server.connection_count == 1


async def test_stream_sends_word_pieces_then_usage(server: FakeLLMServer, transport: str) -> None:
    server.script(reply("Hello streaming world", usage=(7, 3)), reply("again"))

    stream = await litellm.acompletion(**ask(server, stream=True, stream_options={"include_usage": True}))
    chunks = [chunk async for chunk in stream]

    assert [d for d in deltas(chunks) if d] == ["Hello", " streaming", " world"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    built = litellm.stream_chunk_builder(chunks)
    assert built.choices[0].message.content == "Hello streaming world"
    assert (built.usage.prompt_tokens, built.usage.completion_tokens) == (7, 3)
    assert server.requests[0]["stream"] is True

    again = [c async for c in await litellm.acompletion(**ask(server, stream=True))]
    assert "".join(d for d in deltas(again) if d) == "again"
    assert server.connection_count == 1  # the streamed body ended cleanly, so the connection was reused


def test_sync_stream_with_chunk_size_and_tokens(server: FakeLLMServer) -> None:
    server.script(reply("abcdefg", chunk_size=3), tokens(5))

    sized = list(litellm.completion(**ask(server, stream=True)))
    counted = list(litellm.completion(**ask(server, stream=True)))

    assert [d for d in deltas(sized) if d] == ["abc", "def", "g"]
    assert [d for d in deltas(counted) if d] == ["tok0", " tok1", " tok2", " tok3", " tok4"]


# --------------------------------------------------------------------------------- tool calls


def test_tool_calls_non_streaming(server: FakeLLMServer) -> None:
    server.script(
        tool_calls(
            call("get_weather", location="Paris"),
            call("get_time", id="call_custom", tz="UTC"),
            text="Checking",
        )
    )

    response = litellm.completion(**ask(server, tools=[WEATHER_TOOL]))

    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking"
    weather, clock = choice.message.tool_calls
    assert (weather.function.name, json.loads(weather.function.arguments)) == (
        "get_weather",
        {"location": "Paris"},
    )
    assert weather.id.startswith("call_")
    assert (clock.id, clock.function.name, json.loads(clock.function.arguments)) == (
        "call_custom",
        "get_time",
        {"tz": "UTC"},
    )
    assert server.requests[0]["tools"] == [WEATHER_TOOL]


async def test_streamed_tool_call_deltas_are_reassembled(server: FakeLLMServer, transport: str) -> None:
    server.script(
        tool_calls(
            call("get_weather", location="Paris", unit="celsius"), call("get_weather", location="Oslo")
        )
    )

    stream = await litellm.acompletion(**ask(server, tools=[WEATHER_TOOL], stream=True))
    chunks = [chunk async for chunk in stream]

    fragments = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len([f for f in fragments if f.index == 0]) > 2  # the arguments came in several pieces
    built = litellm.stream_chunk_builder(chunks)
    assert built.choices[0].finish_reason == "tool_calls"
    paris, oslo = built.choices[0].message.tool_calls
    assert paris.function.name == oslo.function.name == "get_weather"
    assert json.loads(paris.function.arguments) == {"location": "Paris", "unit": "celsius"}
    assert json.loads(oslo.function.arguments) == {"location": "Oslo"}
    assert paris.id != oslo.id


def test_invalid_tool_arguments_are_sent_verbatim(server: FakeLLMServer) -> None:
    broken = '{"location": "Par'
    server.script(
        tool_calls(call("get_weather", raw_arguments=broken)),
        tool_calls(call("get_weather", raw_arguments=broken)),
    )

    plain = litellm.completion(**ask(server, tools=[WEATHER_TOOL]))
    streamed = litellm.stream_chunk_builder(
        list(litellm.completion(**ask(server, tools=[WEATHER_TOOL], stream=True)))
    )

    assert plain.choices[0].message.tool_calls[0].function.arguments == broken
    assert streamed.choices[0].message.tool_calls[0].function.arguments == broken


# ------------------------------------------------------------------------------------- faults


async def test_rate_limit_with_retry_after(server: FakeLLMServer, transport: str) -> None:
    server.script(fault(429, retry_after=7))

    with pytest.raises(litellm.RateLimitError) as caught:
        await litellm.acompletion(**ask(server, max_retries=0))

    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "7"
    assert "Rate limit reached" in str(caught.value)
    assert len(server.requests) == 1


def test_server_error(server: FakeLLMServer) -> None:
    server.script(fault(500))

    with pytest.raises(litellm.InternalServerError) as caught:
        litellm.completion(**ask(server, max_retries=0))

    assert caught.value.status_code == 500
    assert len(server.requests) == 1


def test_client_retry_honours_retry_after(server: FakeLLMServer) -> None:
    server.script(fault(429, retry_after=0.01), reply("after the retry"))

    response = litellm.completion(**ask(server, max_retries=1))

    assert response.choices[0].message.content == "after the retry"
    assert len(server.requests) == 2


def test_fault_message_and_custom_body(server: FakeLLMServer) -> None:
    server.script(
        fault(400, message="tools[0] is invalid"), fault(503, body={"error": {"message": "overloaded!"}})
    )

    with pytest.raises(litellm.BadRequestError, match="tools\\[0\\] is invalid"):
        litellm.completion(**ask(server, max_retries=0))
    with pytest.raises(litellm.ServiceUnavailableError, match="overloaded!"):
        litellm.completion(**ask(server, max_retries=0))


async def test_slow_first_byte_trips_the_client_timeout(server: FakeLLMServer, transport: str) -> None:
    server.script(slow_first_byte(2.0, reply("too late")))

    with pytest.raises(litellm.Timeout):
        await litellm.acompletion(**ask(server, timeout=0.1, max_retries=0))


async def test_slow_first_byte_delays_the_first_chunk(server: FakeLLMServer) -> None:
    server.script(slow_first_byte(0.05, reply("late")))

    started = time.perf_counter()
    stream = await litellm.acompletion(**ask(server, stream=True))
    first = await stream.__anext__()
    waited = time.perf_counter() - started
    rest = [chunk async for chunk in stream]

    assert waited >= 0.05
    assert "".join(d for d in deltas([first, *rest]) if d) == "late"


async def test_cut_stream_raises_after_the_chunks_sent(server: FakeLLMServer, transport: str) -> None:
    server.script(cut_stream(3, reply("one two three four")))  # role delta, "one", " two", then the drop

    received: list[str | None] = []
    stream = await litellm.acompletion(**ask(server, stream=True, max_retries=0))
    with pytest.raises(MidStreamFallbackError) as caught:
        async for chunk in stream:
            received.extend(deltas([chunk]))

    assert [d for d in received if d] == ["one", " two"]
    assert isinstance(caught.value.original_exception, litellm.APIConnectionError)
    assert caught.value.generated_content == "one two"


def test_graceful_cut_ends_without_finish_reason(server: FakeLLMServer) -> None:
    server.script(cut_stream(2, reply("one two three"), graceful=True), reply("next"))

    received: list[str | None] = []
    with pytest.raises(MidStreamFallbackError, match="finish_reason"):
        for chunk in litellm.completion(**ask(server, stream=True, max_retries=0)):
            received.extend(deltas([chunk]))

    assert [d for d in received if d] == ["one"]
    assert litellm.completion(**ask(server)).choices[0].message.content == "next"


def test_graceful_cut_keeps_the_connection_usable(server: FakeLLMServer) -> None:
    server.script(cut_stream(2, reply("one two three"), graceful=True), reply("next"))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)

    conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": [], "stream": True}))
    events = conn.getresponse().read().decode().split("\n\n")
    conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": []}))
    after = json.loads(conn.getresponse().read())
    conn.close()

    assert [e for e in events if e][-1].endswith('"finish_reason":null}]}')  # no finish chunk, no [DONE]
    assert len([e for e in events if e]) == 2
    assert after["choices"][0]["message"]["content"] == "next"
    assert server.connection_count == 1


def test_cut_non_streaming_response(server: FakeLLMServer) -> None:
    server.script(cut_stream(0, reply("never complete")), reply("fine"))

    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        litellm.completion(**ask(server, max_retries=0))
    assert litellm.completion(**ask(server)).choices[0].message.content == "fine"


# ----------------------------------------------------------------------------- timing, hooks


def test_latency_applies_to_every_response(server: FakeLLMServer) -> None:
    server.default = reply("ok")
    server.latency = 0.05

    started = time.perf_counter()
    litellm.completion(**ask(server))
    litellm.completion(**ask(server))

    assert time.perf_counter() - started >= 0.1


def test_tokens_per_second_paces_the_stream(server: FakeLLMServer) -> None:
    server.script(tokens(5, tokens_per_second=100))

    started = time.perf_counter()
    chunks = list(litellm.completion(**ask(server, stream=True)))

    assert time.perf_counter() - started >= 0.04  # 5 tokens: the first at once, then one every 10 ms
    assert len([d for d in deltas(chunks) if d]) == 5


def test_wait_for_requests_blocks_until_they_arrive(server: FakeLLMServer) -> None:
    server.default = reply("ok")
    results: list[Any] = []
    worker = threading.Thread(
        target=lambda: results.extend(litellm.completion(**ask(server, f"q{i}")) for i in range(2))
    )
    worker.start()

    bodies = server.wait_for_requests(2, timeout=10)
    worker.join(10)

    assert [b["messages"][0]["content"] for b in bodies] == ["q0", "q1"]
    assert len(results) == 2
    with pytest.raises(TimeoutError, match="got 2 request"):
        server.wait_for_requests(3, timeout=0.01)


def test_responder_is_asked_before_the_script(server: FakeLLMServer) -> None:
    def echo(body: dict[str, Any]) -> Reply | None:
        text = body["messages"][-1]["content"]
        return reply(text.upper()) if text.startswith("echo") else None

    server.responder = echo
    server.script(reply("from the script"))

    assert litellm.completion(**ask(server, "echo me")).choices[0].message.content == "ECHO ME"
    assert litellm.completion(**ask(server, "other")).choices[0].message.content == "from the script"
    assert server.remaining == 0


def test_responder_error_becomes_a_500(server: FakeLLMServer, caplog: pytest.LogCaptureFixture) -> None:
    server.responder = lambda body: 1 / 0

    with pytest.raises(litellm.InternalServerError, match="ZeroDivisionError"):
        litellm.completion(**ask(server, max_retries=0))
    assert "responder raised" in caplog.text


def test_exhausted_script_then_default_and_push(server: FakeLLMServer) -> None:
    with pytest.raises(litellm.InternalServerError, match="fake server script exhausted"):
        litellm.completion(**ask(server, max_retries=0))

    server.default = "the default"  # a str means reply(str)
    server.push("pushed")
    assert litellm.completion(**ask(server)).choices[0].message.content == "pushed"
    assert litellm.completion(**ask(server)).choices[0].message.content == "the default"

    server.script("a", "b")
    server.script("c")  # script() replaces
    assert server.remaining == 1
    server.reset()
    assert (server.remaining, server.requests) == (0, [])


# ---------------------------------------------------------------------------------- raw HTTP


def raw(server: FakeLLMServer, method: str, path: str, body: bytes | str | None = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        conn.request(method, path, body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_unknown_routes_are_404_json(server: FakeLLMServer) -> None:
    for method, path in [
        ("GET", "/v1/nope"),
        ("GET", "/v1/chat/completions"),
        ("POST", "/v2/chat/completions"),
    ]:
        status, payload = raw(server, method, path)
        assert status == 404
        assert payload["error"]["code"] == "not_found"
    assert server.requests == []


def test_malformed_json_is_400(server: FakeLLMServer) -> None:
    status, payload = raw(server, "POST", "/v1/chat/completions", "{not json")
    assert status == 400
    assert payload["error"]["type"] == "invalid_request_error"

    status, _ = raw(server, "POST", "/v1/chat/completions", "[1, 2]")
    assert status == 400
    assert server.requests == []


def test_models_route_and_path_without_v1(server: FakeLLMServer) -> None:
    server.default = reply("ok")

    status, models = raw(server, "GET", "/v1/models")
    assert status == 200
    assert "gpt-4o-mini" in [m["id"] for m in models["data"]]

    status, completion = raw(server, "POST", "/chat/completions", json.dumps({"model": "m", "messages": []}))
    assert status == 200
    assert completion["object"] == "chat.completion"
    assert completion["choices"][0]["message"]["content"] == "ok"


def test_keep_alive_large_and_chunked_bodies(server: FakeLLMServer) -> None:
    server.default = reply("ok")
    big = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 2_000_000}]}).encode()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)

    conn.request("POST", "/v1/chat/completions", big, {"Content-Type": "application/json"})
    assert conn.getresponse().read()
    conn.request(
        "POST", "/v1/chat/completions", iter([big[:1000], big[1000:]]), {"Content-Type": "application/json"}
    )
    assert json.loads(conn.getresponse().read())["choices"][0]["message"]["content"] == "ok"
    conn.close()

    assert server.connection_count == 1
    assert [len(b["messages"][0]["content"]) for b in server.requests] == [2_000_000, 2_000_000]


def test_sse_wire_format_matches_openai(server: FakeLLMServer) -> None:
    server.script(tool_calls(call("get_weather", id="call_w", location="Paris"), usage=(3, 4)))
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    body = {"model": "m", "messages": [], "stream": True, "stream_options": {"include_usage": True}}
    conn.request("POST", "/v1/chat/completions", json.dumps(body))
    response = conn.getresponse()
    assert response.getheader("Content-Type", "").startswith("text/event-stream")
    assert response.getheader("Transfer-Encoding") == "chunked"

    events = [e.removeprefix("data: ") for e in response.read().decode().split("\n\n") if e]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    first = chunks[0]["choices"][0]["delta"]
    assert first["role"] == "assistant"
    assert first["tool_calls"] == [
        {"index": 0, "id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    ]
    fragments = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks[1:-2]]
    assert all(set(f) == {"index", "function"} for f in fragments)
    assert "".join(f["function"]["arguments"] for f in fragments) == '{"location": "Paris"}'
    assert chunks[-2]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_http10_stream_ends_with_the_connection(server: FakeLLMServer) -> None:
    server.script(reply("old client"))
    payload = json.dumps({"model": "m", "messages": [], "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.0\r\nContent-Length: %d\r\n\r\n%b" % (len(payload), payload)
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk

    head, _, body = data.partition(b"\r\n\r\n")
    assert b"Connection: close" in head
    assert b"Transfer-Encoding" not in head
    assert body.endswith(b"data: [DONE]\n\n")


def test_stop_closes_connections_and_restart_gets_a_new_port() -> None:
    fake = FakeLLMServer(reply("only"))
    fake.start()
    port = fake.port
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": []}))
    assert conn.getresponse().read()

    fake.stop()
    fake.stop()  # idempotent
    with pytest.raises(RuntimeError, match="not running"):
        _ = fake.base_url
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        conn.request("POST", "/v1/chat/completions", "{}")
        conn.getresponse().read()
    conn.close()

    with fake:
        assert fake.base_url.startswith("http://127.0.0.1:") and fake.base_url.endswith("/v1")
        assert len(fake.requests) == 1  # requests survive a restart until reset()


def test_step_builders_validate_and_coerce(server: FakeLLMServer) -> None:
    assert isinstance(reply("x"), Reply) and isinstance(tokens(2), Reply)
    assert isinstance(call("f"), ToolCall) and isinstance(tool_calls(call("f")), ToolCalls)
    assert isinstance(fault(500), Fault)
    assert isinstance(slow_first_byte(0, "x"), SlowFirstByte) and isinstance(cut_stream(1, "x"), CutStream)
    assert call("f", id="c1").arguments == "{}"
    assert fault(429, retry_after=1.5).headers == (("Retry-After", "1.5"),)
    assert tokens(3).text == "tok0 tok1 tok2"

    with pytest.raises(TypeError):
        call("f", raw_arguments="{}", x=1)
    with pytest.raises(ValueError):
        tool_calls()
    with pytest.raises(ValueError):
        fault(200)
    with pytest.raises(TypeError):
        server.push(42)  # type: ignore[arg-type]

    server.script(call("lookup", order_id=42))  # a bare call(...) means tool_calls(call(...))
    response = litellm.completion(**ask(server))
    assert json.loads(response.choices[0].message.tool_calls[0].function.arguments) == {"order_id": 42}


# ---------------------------------------------------------------------------------- embeddings


def test_embeddings_route_answers_each_input_with_a_unit_vector(server: FakeLLMServer) -> None:
    body = json.dumps({"model": "text-embedding-3-small", "input": ["redis cache", "Redis  CACHE!", "postgres"]})
    status, payload = raw(server, "POST", "/v1/embeddings", body)
    assert status == 200
    assert payload["object"] == "list" and payload["model"] == "text-embedding-3-small"
    assert [item["index"] for item in payload["data"]] == [0, 1, 2]
    vectors = [item["embedding"] for item in payload["data"]]
    assert vectors[0] == pytest.approx(fake_embedding("redis cache"))
    assert len(vectors[0]) == 64 and sum(x * x for x in vectors[0]) == pytest.approx(1.0)
    assert vectors[0] == vectors[1]  # words, lower-cased, punctuation ignored
    assert sum(a * b for a, b in zip(vectors[0], vectors[2], strict=True)) < 0.5
    assert payload["usage"]["prompt_tokens"] == payload["usage"]["total_tokens"] > 0
    assert server.embedding_requests == [json.loads(body)]
    assert server.requests == []  # chat completions only
    server.reset()
    assert server.embedding_requests == []


def test_embeddings_route_dimensions_base64_and_plain_path(server: FakeLLMServer) -> None:
    status, payload = raw(server, "POST", "/embeddings", json.dumps({"model": "m", "input": "x", "dimensions": 4}))
    assert status == 200
    assert payload["data"][0]["embedding"] == pytest.approx(fake_embedding("x", 4))
    status, payload = raw(server, "POST", "/v1/embeddings",
                          json.dumps({"model": "m", "input": ["a b"], "encoding_format": "base64"}))
    decoded = struct.unpack("<64f", base64.b64decode(payload["data"][0]["embedding"]))
    assert decoded == pytest.approx(fake_embedding("a b"), abs=1e-6)
    assert fake_embedding("...", 3) == [1.0, 0.0, 0.0]  # no word: the first axis


def test_embeddings_route_rejects_bad_requests(server: FakeLLMServer) -> None:
    for body, message in [
        ("{not json", "Expecting property name"),
        ("[1]", "must be an object"),
        (json.dumps({"model": "m"}), "'input' must be a string or a non-empty list of strings"),
        (json.dumps({"model": "m", "input": [1, 2]}), "'input' must be a string"),
        (json.dumps({"model": "m", "input": "x", "dimensions": 0}), "'dimensions' must be a positive integer"),
    ]:
        status, payload = raw(server, "POST", "/v1/embeddings", body)
        assert status == 400
        assert message in payload["error"]["message"]
    status, _ = raw(server, "GET", "/v1/embeddings")
    assert status == 404


def test_litellm_embedding_over_the_fake_server(server: FakeLLMServer) -> None:
    response = litellm.embedding(model="openai/text-embedding-3-small", input=["hello world"],
                                 api_base=server.base_url, api_key="sk-fake")
    assert response.data[0]["embedding"] == pytest.approx(fake_embedding("hello world"))
    assert server.embedding_requests[0]["input"] == ["hello world"]


# ------------------------------------------------------------------------------------- child process


def pid_responder(body: dict[str, Any]) -> Any:
    """Module-level (so picklable): answer "pid <n>" for "pid?", else fall back to the script."""
    if body["messages"][-1]["content"] == "pid?":
        return reply(f"pid {os.getpid()}")
    return None


async def test_server_process_answers_litellm_from_a_child_process() -> None:
    with FakeLLMServerProcess(reply("scripted"), default="fallback", responder=pid_responder) as server:
        texts = [
            (await litellm.acompletion(**ask(server, content))).choices[0].message.content  # type: ignore[arg-type]
            for content in ("pid?", "a", "b")
        ]

        assert texts == [f"pid {server.pid}", "scripted", "fallback"]
        assert server.pid != os.getpid()
        assert [body["messages"][-1]["content"] for body in server.requests] == ["pid?", "a", "b"]
        base_url = server.base_url
    with pytest.raises(RuntimeError, match="not running"):
        server.requests  # noqa: B018
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")


def test_server_process_rejects_an_unpicklable_responder() -> None:
    server = FakeLLMServerProcess(responder=lambda body: reply("x"))
    with pytest.raises(TypeError, match="module-level function as responder"):
        server.start()


def test_server_process_reports_a_port_already_in_use() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError, match="failed to start: OSError"):
            FakeLLMServerProcess(port=port).start()


# ------------------------------------------------------------------------------------- lifecycle


def test_close_connections_drops_idle_keep_alive_ones(server: FakeLLMServer) -> None:
    server.default = reply("ok")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": []}))
    assert conn.getresponse().read()
    assert conn.sock is not None  # kept alive

    server.close_connections()

    assert conn.sock.recv(1) == b""  # the idle keep-alive connection was dropped
    conn.close()
    assert raw(server, "GET", "/v1/models")[0] == 200  # still listening
    assert server.connection_count == 2


def test_a_scripted_cut_logs_no_server_error(server: FakeLLMServer, caplog: pytest.LogCaptureFixture) -> None:
    server.script(cut_stream(2, reply("one two three")), cut_stream(0, reply("never")))

    with pytest.raises(MidStreamFallbackError):
        list(litellm.completion(**ask(server, stream=True, max_retries=0)))
    with pytest.raises(litellm.InternalServerError):
        litellm.completion(**ask(server, max_retries=0))

    assert [r for r in caplog.records if r.levelno >= 40] == []


def test_stop_is_prompt_with_a_stream_in_flight() -> None:
    fake = FakeLLMServer(tokens(100, tokens_per_second=10)).start()  # ten seconds of stream
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
    conn.request("POST", "/v1/chat/completions", json.dumps({"model": "m", "messages": [], "stream": True}))
    response = conn.getresponse()
    assert response.read1(65536).startswith(b"data: ")

    started = time.perf_counter()
    fake.stop()
    stopped = time.perf_counter() - started

    assert stopped < 2.0  # uvicorn's own stop polls every 0.1 s and waits for the stream to end
    with pytest.raises(http.client.IncompleteRead):
        response.read()  # the stream was dropped, not finished
    conn.close()
