"""The GenAI attribute sets of the core's spans and metrics (robotlab._genai), built once and kept."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from robotlab import _genai, telemetry
from robotlab.config import configure, get_config
from robotlab.llm import LLMRequest, LLMResponse
from tests.robotlab.spans import Recorder, recording

MODEL = "openai/gpt-4o-mini"


class _Tool:
    def __init__(self, description: object = "Current weather.", mcp: str | None = None) -> None:
        self.description = description
        self.mcp = mcp


class _Client:
    provider = "anthropic"


@pytest.fixture
def spans() -> Iterator[Recorder]:
    config = get_config()
    saved = (config.instrument, config.capture_content)
    configure(instrument=True, capture_content=False)
    with recording() as recorder:
        yield recorder
    config.instrument, config.capture_content = saved


def test_each_set_is_built_once_per_robot_model_and_tool() -> None:
    name, attributes = _genai.agent_span("weather", MODEL, "Says the weather.")
    assert _genai.agent_span("weather", MODEL, "Says the weather.")[1] is attributes
    assert _genai.agent_span("weather", MODEL, None)[1] is not attributes
    assert name == "invoke_agent weather"
    assert attributes == {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
                          "gen_ai.request.model": MODEL, "gen_ai.provider.name": "openai",
                          "gen_ai.agent.description": "Says the weather."}
    tool = _Tool()
    assert _genai.tool_span("get_weather", tool)[1] is _genai.tool_span("get_weather", _Tool())[1]
    streamed, plain = _genai.chat_span(MODEL, None, True), _genai.chat_span(MODEL, None, False)
    assert streamed[1]["gen_ai.request.stream"] is True and "gen_ai.request.stream" not in plain[1]
    assert streamed[2] == plain[2] == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                       "gen_ai.request.model": MODEL}


def test_the_client_names_the_provider_of_a_bare_model() -> None:
    name, span, _ = _genai.chat_span("claude-x", _Client(), False)
    assert name == "chat claude-x" and span["gen_ai.provider.name"] == "anthropic"
    assert _genai.chat_span("claude-x", None, False)[1]["gen_ai.provider.name"] == "_OTHER"
    assert _genai.chat_span(None, None, False)[0] == "chat"


def test_tool_sets_name_mcp_servers_and_skip_odd_descriptions() -> None:
    _, remote = _genai.tool_span("search", _Tool(mcp="docs-server"))
    assert remote["gen_ai.tool.type"] == "extension" and remote["robotlab.mcp.server"] == "docs-server"
    _, odd = _genai.tool_span("search", _Tool(description=["not", "text"]))
    assert odd["gen_ai.tool.type"] == "function"
    assert "gen_ai.tool.description" not in odd and "robotlab.mcp.server" not in odd


def test_metric_sets_add_the_response_model_and_the_error_only_where_given() -> None:
    common = _genai.chat_span(MODEL, None, False)[2]
    duration, tokens_in, tokens_out = _genai.chat_metrics(common, "gpt-4o-mini-2024", None)
    assert duration == {**common, "gen_ai.response.model": "gpt-4o-mini-2024"}
    assert tokens_in == {**duration, "gen_ai.token.type": "input"}
    assert tokens_out == {**duration, "gen_ai.token.type": "output"}
    failed = _genai.chat_metrics(common, None, "TimeoutError")[0]
    assert failed == {**common, "error.type": "TimeoutError"}
    assert _genai.chat_metrics(common, "gpt-4o-mini-2024", None)[0] is duration
    assert "error.type" not in duration and "gen_ai.response.model" not in common


def test_caches_start_again_when_full() -> None:
    for index in range(_genai.CACHE_SIZE + 5):
        _genai.agent_span(f"robot-{index}", None, None)
    assert 0 < len(_genai._agents) <= _genai.CACHE_SIZE


def test_a_call_s_own_values_never_reach_the_kept_sets(spans: Recorder) -> None:
    """Per-call values (parameters, contents, call ids, run ids) are added to copies, never to the kept sets."""
    configure(capture_content=True)
    with telemetry.chat(None, LLMRequest(model=MODEL, messages=[{"role": "user", "content": "secret"}],
                                         params={"temperature": 0.2, "seed": True}), streamed=False) as chat:
        assert chat is not None
        chat.answered(LLMResponse(content="ok", model="gpt-4o-mini-2024"))
    configure(capture_content=False)
    with telemetry.chat(None, LLMRequest(model=MODEL, messages=[]), streamed=False) as chat:
        assert chat is not None
        chat.answered(LLMResponse(content="ok"))

    async def tools() -> None:
        for call_id in ("call_1", "call_2"):
            await telemetry.execute_tool(call_id, "get_weather", "{}", _Tool(), asyncio.sleep(0, "sunny"))
        for run_id in ("run-1", None):
            await telemetry.invoke_agent("weather", asyncio.sleep(0), model=MODEL, run_id=run_id)

    asyncio.run(tools())
    first, second = spans.named("chat ")
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["gen_ai.request.temperature"] == 0.2 and "gen_ai.request.seed" not in first.attributes
    assert "gen_ai.input.messages" in first.attributes
    assert not {"gen_ai.request.temperature", "gen_ai.input.messages", "gen_ai.response.model"} & set(
        second.attributes)
    assert [s.attributes["gen_ai.tool.call.id"] for s in spans.named("execute_tool ") if s.attributes] == [
        "call_1", "call_2"]
    runs = [s.attributes.get("robotlab.run.id") for s in spans.named("invoke_agent ") if s.attributes]
    assert runs == ["run-1", None]
    assert _genai.chat_span(MODEL, None, False)[1] == {"gen_ai.operation.name": "chat",
                                                       "gen_ai.provider.name": "openai",
                                                       "gen_ai.request.model": MODEL}
