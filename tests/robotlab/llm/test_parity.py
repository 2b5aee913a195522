"""One behaviour, two transports: each case runs through litellm and the direct client over real HTTP.

Every case runs the same script against the same FakeLLMServer through ``AutoLLM(transport="litellm")`` and
``AutoLLM(transport="direct")`` and compares what a caller sees: the answer's fields, the streamed pieces, the
robot's events, the error (type, message, status) and the number of requests (retries).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from robotlab.errors import InferenceError
from robotlab.llm import AutoLLM, LLMRequest
from robotlab.robot import build
from robotlab.testing.server import FakeLLMServer, call, cut_stream, fault, reply, slow_first_byte, tool_calls
from robotlab.tools import tool

MODEL = "openai/gpt-4o-mini"
TRANSPORTS = ("litellm", "direct")
FIELDS = ("content", "tool_calls", "input_tokens", "output_tokens", "finish_reason", "model", "thinking")


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


def llm(server: FakeLLMServer, transport: str, **options: Any) -> AutoLLM:
    return AutoLLM(transport=transport, api_base=server.base_url, api_key="sk-fake", **options)


def request(**params: Any) -> LLMRequest:
    return LLMRequest(model=MODEL, messages=[{"role": "user", "content": "hi"}], params=params)


async def outcome(server: FakeLLMServer, transport: str, steps: list[Any], *, stream: bool,
                  params: dict[str, Any] | None = None, detail: str = "", **options: Any) -> dict[str, Any]:
    """What a caller of ``transport`` sees for ``steps``: answer fields or error, pieces, requests sent."""
    server.reset()
    server.script(*steps)
    pieces: list[str] = []
    seen: dict[str, Any] = {}
    try:
        response = await llm(server, transport, **options).complete(
            request(**(params or {})), on_text=pieces.append if stream else None)
    except InferenceError as exc:
        # RobotLab's summary is the same; the transport's own detail that follows it differs in wording
        head = re.match(r"LLM request to '[^']*' failed(: [^:]+)?", str(exc))
        assert head is not None, str(exc)
        seen["error"] = (type(exc).__name__, head.group(0), getattr(exc, "status_code", None))
        seen["detail"] = detail in str(exc)
    else:
        seen.update({name: getattr(response, name) for name in FIELDS})
        seen["cost"] = round(response.cost, 12)
        assert response.transport == transport
    seen["pieces"] = pieces
    seen["requests"] = len(server.requests)
    return seen


async def both(server: FakeLLMServer, steps: list[Any], *, stream: bool, **options: Any) -> dict[str, Any]:
    """The outcome through each transport, asserted equal; returns the litellm one."""
    ours = await outcome(server, "direct", steps, stream=stream, **options)
    sent_direct = server.requests
    theirs = await outcome(server, "litellm", steps, stream=stream, **options)
    assert ours == theirs
    assert [r["messages"] for r in sent_direct] == [r["messages"] for r in server.requests]
    return theirs


@pytest.mark.parametrize("stream", [False, True])
async def test_text_usage_and_cost(server: FakeLLMServer, stream: bool) -> None:
    seen = await both(server, [reply("Hello there, friend", usage=(1200, 40))], stream=stream)
    assert seen["content"] == "Hello there, friend"
    assert (seen["input_tokens"], seen["output_tokens"]) == (1200, 40)
    assert seen["cost"] == pytest.approx(1200 * 0.15e-6 + 40 * 0.6e-6)
    assert seen["pieces"] == (["Hello", " there,", " friend"] if stream else [])


@pytest.mark.parametrize("stream", [False, True])
async def test_parallel_tool_calls_and_streamed_deltas(server: FakeLLMServer, stream: bool) -> None:
    seen = await both(server, [tool_calls(call("get_weather", id="w1", location="Paris"),
                                          call("get_time", id="t1", zone="CET"), usage=(50, 9))], stream=stream)
    assert [(c.id, c.name) for c in seen["tool_calls"]] == [("w1", "get_weather"), ("t1", "get_time")]
    assert seen["finish_reason"] == "tool_calls" and seen["content"] is None


@pytest.mark.parametrize("stream", [False, True])
async def test_bad_json_arguments_reach_the_caller_as_sent(server: FakeLLMServer, stream: bool) -> None:
    seen = await both(server, [tool_calls(call("get_weather", id="w1", raw_arguments='{"location": "Par'))],
                      stream=stream)
    assert seen["tool_calls"][0].arguments == '{"location": "Par'


class City(BaseModel):
    city: str


async def test_structured_output_sends_the_same_schema(server: FakeLLMServer) -> None:
    sent = []
    for transport in TRANSPORTS:
        seen = await outcome(server, transport, [reply('{"city": "Paris"}')], stream=False,
                             params={"response_format": City})
        assert seen["content"] == '{"city": "Paris"}'
        sent.append(server.requests[0]["response_format"])
    assert sent[0] == sent[1]
    assert sent[0]["json_schema"]["name"] == "City"


@pytest.mark.parametrize("stream", [False, True])
async def test_rate_limit_with_retry_after_is_retried(server: FakeLLMServer, stream: bool) -> None:
    seen = await both(server, [fault(429, retry_after=0), reply("recovered")], stream=stream, num_retries=1)
    assert seen["content"] == "recovered" and seen["requests"] == 2


@pytest.mark.parametrize("status", [429, 500])
@pytest.mark.parametrize("stream", [False, True])
async def test_http_errors_without_retries(server: FakeLLMServer, status: int, stream: bool) -> None:
    seen = await both(server, [fault(status, message="scripted failure")], stream=stream, num_retries=0,
                      detail="scripted failure")
    kind = "rate limited" if status == 429 else "provider error"
    assert seen["error"] == ("InferenceError", f"LLM request to '{MODEL}' failed: {kind} (HTTP {status})", status)
    assert seen["detail"]
    assert seen["requests"] == 1


async def test_server_error_retried_then_given_up(server: FakeLLMServer) -> None:
    seen = await both(server, [fault(500, retry_after=0), fault(500, retry_after=0)], stream=False, num_retries=1)
    assert seen["error"][2] == 500 and seen["requests"] == 2


async def test_timeout(server: FakeLLMServer) -> None:
    seen = await both(server, [slow_first_byte(2.0, reply("late"))], stream=False, timeout=0.3, num_retries=0)
    assert seen["error"] == ("InferenceError", f"LLM request to '{MODEL}' failed: timed out (HTTP 408)", 408)


@pytest.mark.parametrize("graceful", [False, True])
async def test_stream_cut_mid_way(server: FakeLLMServer, graceful: bool) -> None:
    seen = await both(server, [cut_stream(3, reply("a b c d e f g h"), graceful=graceful)], stream=True,
                      num_retries=0)
    assert seen["error"][1] == f"LLM request to '{MODEL}' failed: the response stream was interrupted"
    assert seen["pieces"] == ["a", " b"]


@tool
def get_weather(location: str) -> dict[str, Any]:
    """Current weather for a location."""
    return {"location": location, "temp_c": 21}


def run_robot(server: FakeLLMServer, transport: str, steps: list[Any]) -> tuple[Any, list[tuple[str, Any]]]:
    server.reset()
    server.script(*steps)
    events: list[tuple[str, Any]] = []
    keep: Callable[[Any], None] = lambda event: events.append((str(event.kind), event.data.get("name")))  # noqa: E731
    robot = build(name="assistant", model=MODEL, llm=llm(server, transport), local_tools=[get_weather])
    return robot.run("Weather?", on_event=keep, on_content=lambda _: None), events


def test_a_robot_run_has_the_same_result_and_events(server: FakeLLMServer) -> None:
    steps = [tool_calls(call("get_weather", id="w1", location="Paris"), call("get_weather", id="w2", raw_arguments="{"),
                        usage=(200, 20)), reply("Paris is 21C.", usage=(300, 12))]
    runs = {transport: run_robot(server, transport, steps) for transport in TRANSPORTS}
    (direct, direct_events), (lite, lite_events) = runs["direct"], runs["litellm"]
    # the two tool calls run concurrently, so their events may interleave differently from run to run
    assert sorted(direct_events) == sorted(lite_events) and direct_events
    assert (direct_events[0], direct_events[-1]) == (lite_events[0], lite_events[-1])
    # the checksum covers created_at (whole seconds), so two runs a second apart differ there alone: compare it
    # with the two creation times made equal
    varying = {"id": None, "created_at": None, "duration": None, "transport": None, "checksum": None}
    assert direct.export() | varying == lite.export() | varying
    lite.created_at = direct.created_at
    assert direct.checksum == lite.checksum
    assert (direct.transport, lite.transport) == ("direct", "litellm")
    assert direct.reply == "Paris is 21C."
