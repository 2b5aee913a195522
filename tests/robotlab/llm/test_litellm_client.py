"""LLMClient and Robot over the real litellm path, against FakeLLMServer on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.errors import ConfigurationError, InferenceError
from robotlab.llm import LLMClient, LLMRequest, RealRequestBlocked, check_allow_real_requests
from robotlab.robot import build
from robotlab.testing import allow_real_requests
from robotlab.testing.server import FakeLLMServer, call, cut_stream, fault, reply, slow_first_byte, tool_calls
from robotlab.tools import tool

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


def client(server: FakeLLMServer, **options: Any) -> LLMClient:
    options.setdefault("num_retries", 0)
    return LLMClient(api_base=server.base_url, api_key="sk-fake", **options)


def request(text: str = "hi", **params: Any) -> LLMRequest:
    return LLMRequest(model=MODEL, messages=[{"role": "user", "content": text}], params=params)


async def test_complete_maps_text_usage_and_cost(server: FakeLLMServer) -> None:
    server.script(reply("Hello there", usage=(1000, 500)))
    response = await client(server).complete(request(temperature=0.0))
    assert response.content == "Hello there"
    assert (response.input_tokens, response.output_tokens) == (1000, 500)
    assert response.cost == pytest.approx(1000 * 0.15e-6 + 500 * 0.6e-6)
    assert response.finish_reason == "stop"
    assert server.requests[0]["temperature"] == 0.0
    assert server.requests[0]["messages"] == [{"role": "user", "content": "hi"}]


async def test_stream_calls_on_text_in_order_and_reports_usage(server: FakeLLMServer) -> None:
    server.script(reply("one two three four", usage=(10, 4)))
    pieces: list[str] = []
    response = await client(server).complete(request(), on_text=pieces.append)
    assert "".join(pieces) == "one two three four"
    assert len(pieces) >= 4
    assert response.content == "one two three four"
    assert (response.input_tokens, response.output_tokens) == (10, 4)
    assert server.requests[0]["stream"] is True


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_calls_are_mapped(server: FakeLLMServer, stream: bool) -> None:
    server.script(tool_calls(call("get_weather", id="c1", location="Paris"), call("get_time", id="c2", zone="UTC")))
    response = await client(server).complete(request(), on_text=(lambda _: None) if stream else None)
    assert [(c.id, c.name) for c in response.tool_calls] == [("c1", "get_weather"), ("c2", "get_time")]
    assert response.tool_calls[0].arguments.replace(" ", "") == '{"location":"Paris"}'
    assert response.finish_reason == "tool_calls"


async def test_rate_limit_after_retries_is_an_inference_error(server: FakeLLMServer) -> None:
    server.script(fault(429, retry_after=0), fault(429, retry_after=0))
    with pytest.raises(InferenceError, match=r"rate limited \(HTTP 429\)") as info:
        await client(server, num_retries=1).complete(request())
    assert getattr(info.value, "status_code", None) == 429
    assert len(server.requests) == 2


async def test_retry_recovers_from_one_server_error(server: FakeLLMServer) -> None:
    server.script(fault(500), reply("recovered"))
    response = await client(server, num_retries=1).complete(request())
    assert response.content == "recovered"
    assert len(server.requests) == 2


async def test_server_error_without_retries(server: FakeLLMServer) -> None:
    server.script(fault(500))
    with pytest.raises(InferenceError, match=r"provider error \(HTTP 500\)"):
        await client(server).complete(request())
    assert len(server.requests) == 1


async def test_slow_first_byte_beyond_timeout_is_an_inference_error(server: FakeLLMServer) -> None:
    server.script(slow_first_byte(2.0, reply("late")))
    with pytest.raises(InferenceError, match="LLM request to 'openai/gpt-4o-mini' failed"):
        await client(server, timeout=0.3).complete(request())


async def test_stream_cut_midway_is_an_inference_error(server: FakeLLMServer) -> None:
    server.script(cut_stream(3, reply("a b c d e f g h")))
    pieces: list[str] = []
    with pytest.raises(InferenceError):
        await client(server).complete(request(), on_text=pieces.append)


async def test_missing_model_is_a_configuration_error(server: FakeLLMServer) -> None:
    with pytest.raises(ConfigurationError, match="No model set"):
        await client(server).complete(LLMRequest(model=None, messages=[]))


def test_guard_blocks_real_providers_but_not_loopback() -> None:
    check_allow_real_requests(MODEL, "http://127.0.0.1:9999/v1")
    check_allow_real_requests(MODEL, "http://localhost:9999/v1")
    with pytest.raises(RealRequestBlocked, match="blocked: tests may not call a real provider"):
        check_allow_real_requests(MODEL, None)
    with pytest.raises(RealRequestBlocked):
        check_allow_real_requests(MODEL, "https://api.openai.com/v1")
    with allow_real_requests():
        check_allow_real_requests(MODEL, None)


async def test_real_request_is_blocked_before_any_network() -> None:
    with pytest.raises(RealRequestBlocked):
        await LLMClient().complete(request())


@tool
def get_weather(location: str) -> dict[str, Any]:
    """Current weather for a location."""
    return {"location": location, "temp_c": 21}


@tool
def get_time(zone: str) -> str:
    """Current time in a time zone."""
    return f"12:00 in {zone}"


def test_robot_with_two_tools_over_real_http(server: FakeLLMServer) -> None:
    server.script(
        tool_calls(
            call("get_weather", id="w1", location="Paris"), call("get_time", id="t1", zone="CET"), usage=(200, 20)
        ),
        reply("Paris is 21C and it is noon.", usage=(300, 12)),
    )
    streamed: list[str] = []
    per_call: list[str] = []
    robot = build(
        name="assistant",
        model=MODEL,
        llm=client(server),
        local_tools=[get_weather, get_time],
        system_prompt="Use tools.",
        on_content=lambda chunk: streamed.append(chunk.content),
    )
    result = robot.run("Weather and time in Paris?", on_content=lambda chunk: per_call.append(chunk.content))
    assert result.reply == "Paris is 21C and it is noon."
    assert "".join(streamed) == "".join(per_call) == result.reply
    assert (result.input_tokens, result.output_tokens) == (500, 32)
    assert result.cost == pytest.approx(500 * 0.15e-6 + 32 * 0.6e-6)
    assert [t.tool.name for t in result.tool_calls] == ["get_weather", "get_time"]
    second = server.requests[1]["messages"]
    assert second[0] == {"role": "system", "content": "Use tools."}
    tool_messages = [m for m in second if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tool_messages] == [
        ("w1", '{"location": "Paris", "temp_c": 21}'),
        ("t1", "12:00 in CET"),
    ]
    sent_tools = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert sent_tools == {"get_weather", "get_time"}


def test_robot_surfaces_provider_failure_as_inference_error(server: FakeLLMServer) -> None:
    server.script(fault(500), fault(500))
    robot = build(model=MODEL, llm=client(server, num_retries=1))
    with pytest.raises(InferenceError, match="HTTP 500"):
        robot.run("x")
    assert len(server.requests) == 2


async def test_stream_cut_is_reported_as_an_interrupted_stream(server: FakeLLMServer) -> None:
    server.script(cut_stream(3, reply("a b c d e f g h")))
    with pytest.raises(InferenceError, match="the response stream was interrupted"):
        await client(server).complete(request(), on_text=lambda _: None)
