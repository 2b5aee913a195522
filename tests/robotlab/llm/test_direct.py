"""OpenAICompatibleLLM against the real FakeLLMServer, and its parity with the litellm LLMClient."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from robotlab.errors import ConfigurationError, InferenceError
from robotlab.llm import LLMClient, LLMRequest, RealRequestBlocked
from robotlab.llm.direct import OpenAICompatibleLLM
from robotlab.robot import build
from robotlab.testing.server import FakeLLMServer, call, cut_stream, fault, reply, slow_first_byte, tool_calls
from robotlab.tools import tool

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


def direct(server: FakeLLMServer, **options: Any) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(api_base=server.base_url, api_key="sk-fake", **options)


def request(text: str = "hi", **params: Any) -> LLMRequest:
    return LLMRequest(model=MODEL, messages=[{"role": "user", "content": text}], params=params)


async def test_complete_maps_text_usage_cost_and_sends_the_request(server: FakeLLMServer) -> None:
    server.script(reply("Hello there", usage=(1000, 500)))
    llm = direct(server, headers={"X-Team": "lab"})
    response = await llm.complete(request(temperature=0.0, extra_headers={"X-Run": "7"}))
    assert response.content == "Hello there"
    assert (response.input_tokens, response.output_tokens) == (1000, 500)
    assert response.cost == pytest.approx(1000 * 0.15e-6 + 500 * 0.6e-6)
    assert response.finish_reason == "stop"
    sent = server.requests[0]
    assert sent["model"] == "gpt-4o-mini"  # the litellm prefix is not part of the name
    assert sent["temperature"] == 0.0
    assert sent["messages"] == [{"role": "user", "content": "hi"}]
    assert "extra_headers" not in sent and "stream" not in sent


async def test_pricing_overrides_the_price_map_and_unknown_models_cost_nothing(server: FakeLLMServer) -> None:
    server.script(reply("a", usage=(2_000_000, 1_000_000)), reply("b", usage=(10, 10)))
    priced = await direct(server, pricing=(1.0, 3.0)).complete(request())
    assert priced.cost == pytest.approx(2.0 + 3.0)
    unknown = await direct(server).complete(LLMRequest(model="my-org/local-llama", messages=[]))
    assert unknown.cost == 0.0
    assert server.requests[1]["model"] == "my-org/local-llama"


async def test_stream_calls_on_text_in_order_and_reports_usage(server: FakeLLMServer) -> None:
    server.script(reply("one two three four", usage=(10, 4)))
    pieces: list[str] = []
    response = await direct(server).complete(request(), on_text=pieces.append)
    assert pieces == ["one", " two", " three", " four"]
    assert response.content == "one two three four"
    assert (response.input_tokens, response.output_tokens) == (10, 4)
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_are_mapped(server: FakeLLMServer, stream: bool) -> None:
    server.script(tool_calls(call("get_weather", id="c1", location="Paris"), call("get_time", id="c2", zone="UTC")))
    response = await direct(server).complete(request(), on_text=(lambda _: None) if stream else None)
    assert [(c.id, c.name) for c in response.tool_calls] == [("c1", "get_weather"), ("c2", "get_time")]
    assert response.tool_calls[0].arguments.replace(" ", "") == '{"location":"Paris"}'
    assert response.finish_reason == "tool_calls"
    assert response.content is None


class Answer(BaseModel):
    city: str


async def test_a_pydantic_schema_becomes_a_json_schema_response_format(server: FakeLLMServer) -> None:
    server.script(reply('{"city": "Paris"}'))
    await direct(server).complete(request(response_format=Answer))
    sent = server.requests[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Answer"
    assert sent["json_schema"]["schema"]["properties"]["city"]["type"] == "string"


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (500, r"provider error \(HTTP 500\)"),
        (429, r"rate limited \(HTTP 429\)"),
        (401, r"authentication failed \(HTTP 401\)"),
        (404, r"model or endpoint not found \(HTTP 404\)"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_http_errors_map_like_llm_client(server: FakeLLMServer, status: int, message: str, stream: bool) -> None:
    server.script(fault(status, message="scripted failure"), fault(status, message="scripted failure"))
    on_text = (lambda _: None) if stream else None
    with pytest.raises(InferenceError, match=message) as ours:
        await direct(server).complete(request(), on_text=on_text)
    with pytest.raises(InferenceError, match=message) as theirs:
        await LLMClient(api_base=server.base_url, api_key="sk-fake", num_retries=0).complete(request(),
                                                                                             on_text=on_text)
    assert getattr(ours.value, "status_code", None) == getattr(theirs.value, "status_code", None) == status
    assert "scripted failure" in str(ours.value)
    assert len(server.requests) == 2  # no retries by default


async def test_retries_on_rate_limit_then_gives_up(server: FakeLLMServer) -> None:
    server.script(fault(429, retry_after=0), fault(429, retry_after=0))
    with pytest.raises(InferenceError, match=r"rate limited \(HTTP 429\)"):
        await direct(server, num_retries=1).complete(request())
    assert len(server.requests) == 2


async def test_retry_recovers_from_one_server_error(server: FakeLLMServer) -> None:
    server.script(fault(500, retry_after=0), reply("recovered"))
    response = await direct(server, num_retries=1).complete(request())
    assert response.content == "recovered"
    assert len(server.requests) == 2


async def test_client_errors_are_not_retried(server: FakeLLMServer) -> None:
    server.script(fault(401), reply("never"))
    with pytest.raises(InferenceError, match="HTTP 401"):
        await direct(server, num_retries=3).complete(request())
    assert len(server.requests) == 1


async def test_slow_first_byte_beyond_timeout_is_a_timeout(server: FakeLLMServer) -> None:
    server.script(slow_first_byte(2.0, reply("late")))
    with pytest.raises(InferenceError, match=r"LLM request to 'openai/gpt-4o-mini' failed: timed out \(HTTP 408\)"):
        await direct(server, timeout=0.3).complete(request())


@pytest.mark.parametrize("graceful", [False, True])
async def test_stream_cut_is_reported_as_an_interrupted_stream(server: FakeLLMServer, graceful: bool) -> None:
    server.script(cut_stream(3, reply("a b c d e f g h"), graceful=graceful))
    pieces: list[str] = []
    with pytest.raises(InferenceError, match="the response stream was interrupted"):
        await direct(server).complete(request(), on_text=pieces.append)
    assert pieces == ["a", " b"]


async def test_an_answer_that_is_not_a_chat_completion_is_an_inference_error() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                     b"Connection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    other = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = other.sockets[0].getsockname()[1]
    async with other:
        llm = OpenAICompatibleLLM(api_base=f"http://127.0.0.1:{port}/v1")
        with pytest.raises(InferenceError, match=r"not a chat completion \(no choices\): \{\}"):
            await llm.complete(request())


async def test_missing_model_is_a_configuration_error(server: FakeLLMServer) -> None:
    with pytest.raises(ConfigurationError, match="No model set"):
        await direct(server).complete(LLMRequest(model=None, messages=[]))


def test_bad_arguments_say_what_is_wrong() -> None:
    with pytest.raises(ConfigurationError, match="needs api_base"):
        OpenAICompatibleLLM(api_base="")
    with pytest.raises(ConfigurationError, match="num_retries must be 0 or more, got -1"):
        OpenAICompatibleLLM(num_retries=-1)


async def test_real_request_is_blocked_before_any_network() -> None:
    with pytest.raises(RealRequestBlocked, match="blocked: tests may not call a real provider"):
        await OpenAICompatibleLLM(api_key="sk-real").complete(request())
    with pytest.raises(RealRequestBlocked):
        await OpenAICompatibleLLM(api_base="https://llm.example.com/v1").complete(request())


async def test_parallel_calls_share_one_pooled_client(server: FakeLLMServer) -> None:
    server.default = reply("ok")
    llm = direct(server)
    answers = await asyncio.gather(*(llm.complete(request(f"n{i}")) for i in range(8)))
    assert [a.content for a in answers] == ["ok"] * 8
    assert len(llm._clients) == 1
    await llm.aclose()
    assert len(llm._clients) == 0


async def test_a_client_given_for_the_loop_sends_its_requests_and_is_closed_with_it() -> None:
    sent: list[str] = []

    def answer(http_request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(http_request.content)["messages"][-1]["content"])
        return httpx.Response(200, json={"choices": [{"message": {"role": "assistant", "content": "mocked"},
                                                      "finish_reason": "stop"}], "model": "m"})

    llm = OpenAICompatibleLLM(api_base="http://127.0.0.1:9/v1")
    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    llm.use_client(client)
    assert (await llm.complete(request("hello"))).content == "mocked" and sent == ["hello"]
    with pytest.raises(ConfigurationError, match="has a client on this event loop already"):
        llm.use_client(httpx.AsyncClient())
    await llm.aclose()
    assert client.is_closed


@pytest.mark.parametrize("stream", [False, True])
async def test_calls_one_after_another_reuse_one_keep_alive_connection(server: FakeLLMServer, stream: bool) -> None:
    server.default = reply("ok")
    llm = direct(server)
    options: dict[str, Any] = {"on_text": lambda text: None} if stream else {}
    answers = [await llm.complete(request(f"n{i}"), **options) for i in range(3)]
    assert [a.content for a in answers] == ["ok"] * 3
    assert server.connection_count == 1  # a streamed body is read to its end after [DONE], so its socket is reused
    await llm.aclose()


async def test_a_body_kept_open_after_done_costs_its_connection_not_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("robotlab.llm.direct._DRAIN_SECONDS", 0.05)
    hold = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")  # the request's headers; its body is not needed
        body = b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                     + f"{len(body):x}\r\n".encode() + body + b"\r\n")
        await writer.drain()
        await hold.wait()  # the body's last chunk never comes
        writer.close()

    listener = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    llm = OpenAICompatibleLLM(api_base=f"http://127.0.0.1:{port}/v1", api_key="sk-fake")
    texts: list[str] = []
    try:
        response = await asyncio.wait_for(llm.complete(request(), on_text=texts.append), timeout=10)
    finally:
        hold.set()
        await llm.aclose()
        listener.close()
    assert (response.content, texts) == ("hi", ["hi"])


@pytest.mark.parametrize("stream", [False, True])
async def test_parity_with_llm_client(server: FakeLLMServer, stream: bool) -> None:
    steps: list[Any] = [reply("Hello there, friend", usage=(120, 4)),
             tool_calls(call("get_weather", id="w1", location="Paris"), call("get_time", id="t1", zone="CET"),
                        usage=(50, 9))]
    on_text = (lambda _: None) if stream else None
    fields = ("content", "tool_calls", "input_tokens", "output_tokens", "finish_reason", "model", "thinking")
    got = {}
    for name, llm in (("litellm", LLMClient(api_base=server.base_url, api_key="sk-fake", num_retries=0)),
                      ("direct", direct(server))):
        server.script(*steps)
        got[name] = [await llm.complete(request(), on_text=on_text) for _ in steps]
    for ours, theirs in zip(got["direct"], got["litellm"], strict=True):
        assert {f: getattr(ours, f) for f in fields} == {f: getattr(theirs, f) for f in fields}
        assert ours.cost == pytest.approx(theirs.cost)
        assert ours.cost > 0
    assert server.requests[0]["messages"] == server.requests[2]["messages"]
    assert server.requests[0]["model"] == server.requests[2]["model"]


@tool
def get_weather(location: str) -> dict[str, Any]:
    """Current weather for a location."""
    return {"location": location, "temp_c": 21}


def test_robot_runs_a_tool_round_and_streams_on_the_sync_path(server: FakeLLMServer) -> None:
    server.script(
        tool_calls(call("get_weather", id="w1", location="Paris"), usage=(200, 20)),
        reply("Paris is 21C.", usage=(300, 12)),
        reply("Still 21C.", usage=(400, 5)),
    )
    streamed: list[str] = []
    robot = build(name="assistant", model=MODEL, llm=direct(server), local_tools=[get_weather],
                  system_prompt="Use tools.", on_content=lambda chunk: streamed.append(chunk.content))
    result = robot.run("Weather in Paris?")
    assert result.reply == "Paris is 21C."
    assert "".join(streamed) == result.reply
    assert (result.input_tokens, result.output_tokens) == (500, 32)
    assert result.cost == pytest.approx(500 * 0.15e-6 + 32 * 0.6e-6)
    assert [t.tool.name for t in result.tool_calls] == ["get_weather"]
    tool_message = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert (tool_message["tool_call_id"], tool_message["content"]) == ("w1", '{"location": "Paris", "temp_c": 21}')
    assert robot.run("And now?").reply == "Still 21C."  # the background loop's pooled client is reused


async def test_robot_arun_surfaces_a_provider_failure(server: FakeLLMServer) -> None:
    server.script(fault(500))
    robot = build(model=MODEL, llm=direct(server))
    with pytest.raises(InferenceError, match="HTTP 500"):
        await robot.arun("x")
