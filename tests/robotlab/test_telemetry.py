"""OpenTelemetry GenAI spans and metrics of runs (robotlab.telemetry), read with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import robotlab
from robotlab.config import configure, get_config, reload_config
from robotlab.errors import InferenceError
from robotlab.llm import LLMRequest, LLMResponse, TextCallback
from robotlab.network import create_network
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab.testing.fake import tool_calls
from robotlab.testing.server import FakeLLMServer, call, reply
from robotlab.testing.server import tool_calls as server_tool_calls
from tests.robotlab.spans import Recorder, parent_of, recording, span_id

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def spans() -> Iterator[Recorder]:
    config = get_config()
    saved = (config.instrument, config.capture_content)
    with recording() as recorder:
        yield recorder
    config.instrument, config.capture_content = saved


@robotlab.tool
def get_weather(location: str) -> str:
    """Current weather for a location."""
    return f"sunny in {location}"


@robotlab.tool
def broken(location: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"no station at {location}")


def test_tool_round_is_one_agent_two_chats_one_tool(spans: Recorder) -> None:
    llm = FakeLLM([tool_call("get_weather", id="call_1", location="Paris", usage=(10, 5)),
                   text("It is sunny.", usage=(20, 7))])
    robot = robotlab.build(name="weather", model=MODEL, llm=llm, local_tools=[get_weather])
    assert robot.run("Weather in Paris?").reply == "It is sunny."

    agent = spans.one("invoke_agent weather")
    chats = spans.named("chat ")
    tool = spans.one("execute_tool get_weather")
    assert [s.name for s in chats] == [f"chat {MODEL}"] * 2
    assert len(spans.spans()) == 4
    assert parent_of(agent) is None
    assert all(parent_of(s) == span_id(agent) for s in (*chats, tool))
    assert len({s.context.trace_id for s in spans.spans() if s.context}) == 1
    assert chats[0].end_time is not None and tool.start_time is not None and tool.start_time >= chats[0].end_time

    assert agent.kind is SpanKind.INTERNAL
    assert agent.attributes is not None
    assert {k: agent.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.agent.name", "gen_ai.usage.input_tokens",
                                             "gen_ai.usage.output_tokens")} == {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
        "gen_ai.usage.input_tokens": 30, "gen_ai.usage.output_tokens": 12}
    first = chats[0]
    assert first.kind is SpanKind.CLIENT
    assert first.attributes is not None
    assert first.attributes["gen_ai.operation.name"] == "chat"
    assert first.attributes["gen_ai.provider.name"] == "openai"
    assert first.attributes["gen_ai.request.model"] == MODEL
    assert first.attributes["gen_ai.usage.input_tokens"] == 10
    assert first.attributes["gen_ai.usage.output_tokens"] == 5
    assert tuple(first.attributes["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "get_weather"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.status.status_code is StatusCode.UNSET
    for span in spans.spans():  # no content unless asked
        assert span.attributes is not None
        assert not {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                    "gen_ai.tool.call.result"} & set(span.attributes)


def test_metrics_record_tokens_and_duration(spans: Recorder) -> None:
    def count(name: str, **attributes: Any) -> int:
        return sum(p.count for p in spans.metric_points(name)
                   if all(p.attributes.get(k) == v for k, v in attributes.items()))

    before = (count("gen_ai.client.operation.duration", **{"gen_ai.request.model": "openai/metrics-model"}),
              count("gen_ai.client.token.usage", **{"gen_ai.token.type": "input",
                                                    "gen_ai.request.model": "openai/metrics-model"}))
    robot = robotlab.build(name="m", model="openai/metrics-model", llm=FakeLLM([text("ok", usage=(3, 2))]))
    robot.run("hi")
    after = (count("gen_ai.client.operation.duration", **{"gen_ai.request.model": "openai/metrics-model"}),
             count("gen_ai.client.token.usage", **{"gen_ai.token.type": "input",
                                                   "gen_ai.request.model": "openai/metrics-model"}))
    assert after == (before[0] + 1, before[1] + 1)


def test_streamed_call_records_time_to_first_chunk(spans: Recorder) -> None:
    with FakeLLMServer(responder=lambda body: reply("Hello there, friend")) as server:
        robot = robotlab.build(name="streamer", model=MODEL, llm=robotlab.llm.OpenAICompatibleLLM(
            api_base=server.base_url, api_key="sk-fake"))
        pieces: list[Any] = []
        robot.run("hi", on_content=pieces.append)
    assert pieces
    chat = spans.one(f"chat {MODEL}")
    assert chat.attributes is not None
    first = chat.attributes["gen_ai.response.time_to_first_chunk"]
    assert isinstance(first, float) and first >= 0
    assert chat.start_time is not None and chat.end_time is not None
    assert first * 1e9 <= chat.end_time - chat.start_time
    assert chat.attributes["gen_ai.request.stream"] is True


class _Cached:
    """An LLM whose provider served part of the prompt from its cache."""

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        return LLMResponse(content="ok", input_tokens=100, output_tokens=2, cached_input_tokens=64,
                           model="gpt-4o-mini-2024-07-18", finish_reason="stop")


def test_cached_input_tokens_are_recorded(spans: Recorder) -> None:
    robotlab.build(name="cached", model=MODEL, llm=_Cached()).run("hi")
    chat = spans.one(f"chat {MODEL}")
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.usage.input_tokens"] == 100
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 64
    assert chat.attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"


def test_clients_read_the_cached_tokens_they_are_told() -> None:
    from robotlab.llm.litellm_client import _cached_tokens

    usage = {"prompt_tokens": 100, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 64}}
    direct = robotlab.llm.OpenAICompatibleLLM(api_base="http://127.0.0.1:9", api_key="sk-fake", pricing=(0, 0))
    assert direct._response(MODEL, usage, None).cached_input_tokens == 64
    assert direct._response(MODEL, {"prompt_tokens": 5}, None).cached_input_tokens == 0
    assert _cached_tokens(usage) == 64
    assert _cached_tokens(None) == 0


def test_failing_model_call_is_an_error_with_its_type(spans: Recorder) -> None:
    llm = FakeLLM([raise_(InferenceError("the provider is down", model=MODEL))])
    robot = robotlab.build(name="unlucky", model=MODEL, llm=llm)
    with pytest.raises(InferenceError):
        robot.run("hi")
    chat = spans.one(f"chat {MODEL}")
    agent = spans.one("invoke_agent unlucky")
    for span in (chat, agent):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "robotlab.errors.InferenceError"
    assert "the provider is down" in (chat.status.description or "")
    assert parent_of(chat) == span_id(agent)


def test_failing_tool_marks_its_span_only(spans: Recorder) -> None:
    llm = FakeLLM([tool_call("broken", location="Atlantis"), text("Sorry.")])
    robot = robotlab.build(name="weather", model=MODEL, llm=llm, local_tools=[broken])
    assert robot.run("Weather in Atlantis?").reply == "Sorry."
    tool = spans.one("execute_tool broken")
    assert tool.status.status_code is StatusCode.ERROR
    assert tool.attributes is not None and tool.attributes["error.type"] == "ValueError"
    assert spans.one("invoke_agent weather").status.status_code is StatusCode.UNSET


def test_content_only_when_asked(spans: Recorder) -> None:
    configure(capture_content=True)
    llm = FakeLLM([tool_call("get_weather", id="call_9", location="Oslo"), text("Cold.")])
    robot = robotlab.build(name="weather", model=MODEL, llm=llm, local_tools=[get_weather], system_prompt="Be brief.")
    robot.run("Weather in Oslo?")
    first, second = spans.named("chat ")
    assert first.attributes is not None and second.attributes is not None
    sent = json.loads(str(first.attributes["gen_ai.input.messages"]))
    assert {"role": "user", "parts": [{"type": "text", "content": "Weather in Oslo?"}]} in sent
    answered = json.loads(str(first.attributes["gen_ai.output.messages"]))
    assert answered[0]["parts"] == [{"type": "tool_call", "id": "call_9", "name": "get_weather",
                                     "arguments": '{"location": "Oslo"}'}]
    assert answered[0]["finish_reason"] == "tool_calls"
    back = json.loads(str(second.attributes["gen_ai.input.messages"]))
    assert back[-1] == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_9",
                                                   "response": "sunny in Oslo"}]}
    tool = spans.one("execute_tool get_weather")
    assert tool.attributes is not None
    assert json.loads(str(tool.attributes["gen_ai.tool.call.arguments"])) == {"location": "Oslo"}
    assert tool.attributes["gen_ai.tool.call.result"] == "sunny in Oslo"


def test_network_is_one_workflow_over_its_task_robots(spans: Recorder) -> None:
    def robot(name: str) -> robotlab.Robot:
        return robotlab.build(name=name, model=MODEL, llm=FakeLLM([text(f"{name} done")]))

    network = create_network(name="pipeline")
    network.task("plan", robot("planner"))
    network.task("left", robot("lefty"), depends_on="plan")
    network.task("right", robot("righty"), depends_on="plan")
    network.task("join", robot("joiner"), depends_on=["left", "right"])
    network.run("go")

    workflow = spans.one("invoke_workflow pipeline")
    assert workflow.attributes is not None
    assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert parent_of(workflow) is None
    agents = {s.name.removeprefix("invoke_agent "): s for s in spans.named("invoke_agent ")}
    assert set(agents) == {"planner", "lefty", "righty", "joiner"}
    assert all(parent_of(agent) == span_id(workflow) for agent in agents.values())
    for chat in spans.named("chat "):
        assert parent_of(chat) in {span_id(agent) for agent in agents.values()}
    assert agents["planner"].end_time is not None and agents["joiner"].start_time is not None
    assert agents["planner"].end_time <= min(agents[n].start_time or 0 for n in ("lefty", "righty"))
    assert agents["joiner"].start_time >= max(agents[n].end_time or 0 for n in ("lefty", "righty"))


def test_delegation_nests_under_the_delegating_tool_call(spans: Recorder) -> None:
    analyst = robotlab.build(name="analyst", model=MODEL, llm=FakeLLM([text("Q3 was good.")]))
    manager: robotlab.Robot

    @robotlab.tool
    def ask_analyst(question: str) -> str:
        """Ask the analyst."""
        return str(manager.delegate(to=analyst, task=question).reply)

    manager = robotlab.build(name="manager", model=MODEL, local_tools=[ask_analyst],
                             llm=FakeLLM([tool_call("ask_analyst", question="How was Q3?"), text("Good.")]))
    assert manager.run("Report on Q3").reply == "Good."
    tool = spans.one("execute_tool ask_analyst")
    delegate = spans.one("invoke_agent analyst")
    top = spans.one("invoke_agent manager")
    assert parent_of(tool) == span_id(top)
    assert parent_of(delegate) == span_id(tool)
    assert [parent_of(s) for s in spans.named("chat ")] == [span_id(top), span_id(delegate), span_id(top)]


async def test_async_delegation_nests_too(spans: Recorder) -> None:
    analyst = robotlab.build(name="analyst", model=MODEL, llm=FakeLLM([text("fine")]))
    manager: robotlab.Robot

    @robotlab.tool
    async def ask_analyst(question: str) -> str:
        """Ask the analyst."""
        return str((await manager.adelegate(to=analyst, task=question)).reply)

    manager = robotlab.build(name="manager", model=MODEL, local_tools=[ask_analyst],
                             llm=FakeLLM([tool_call("ask_analyst", question="?"), text("ok")]))
    await manager.arun("go")
    assert parent_of(spans.one("invoke_agent analyst")) == span_id(spans.one("execute_tool ask_analyst"))


def test_parallel_tool_calls_each_get_a_span(spans: Recorder) -> None:
    llm = FakeLLM([tool_calls(("get_weather", {"location": "A"}, "c1"), ("get_weather", {"location": "B"}, "c2")),
                   text("done")])
    robotlab.build(name="w", model=MODEL, llm=llm, local_tools=[get_weather]).run("go")
    assert sorted(str((s.attributes or {})["gen_ai.tool.call.id"]) for s in spans.named("execute_tool ")) == \
        ["c1", "c2"]


def test_conversation_id_from_the_session(spans: Recorder) -> None:
    robot = robotlab.build(name="chatty", model=MODEL, llm=FakeLLM([text("hi")]))
    robot.run(robotlab.UserMessage("hello", session_id="thread_42"))
    agent = spans.one("invoke_agent chatty")
    assert agent.attributes is not None and agent.attributes["gen_ai.conversation.id"] == "thread_42"


def test_run_id_is_recorded(spans: Recorder) -> None:
    robot = robotlab.build(name="r", model=MODEL, llm=FakeLLM([text("hi")]))
    robot.run("hello", run_id="run-7", on_event=lambda event: None)
    agent = spans.one("invoke_agent r")
    assert agent.attributes is not None and agent.attributes["robotlab.run.id"] == "run-7"


def test_instrument_false_emits_nothing(spans: Recorder) -> None:
    configure(instrument=False)
    llm = FakeLLM([tool_call("get_weather", location="Paris"), text("Sunny.")])
    robotlab.build(name="quiet", model=MODEL, llm=llm, local_tools=[get_weather]).run("Weather?")
    network = create_network(name="quiet-net")
    network.task("only", robotlab.build(name="solo", model=MODEL, llm=FakeLLM([text("ok")])))
    network.run("go")
    assert spans.spans() == []


def test_environment_variable_turns_it_off(spans: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOT_LAB_INSTRUMENT", "false")
    try:
        assert reload_config().instrument is False
        robotlab.build(name="quiet", model=MODEL, llm=FakeLLM([text("ok")])).run("hi")
        assert spans.spans() == []
    finally:
        monkeypatch.delenv("ROBOT_LAB_INSTRUMENT")
        assert reload_config().instrument is True


def test_provider_names_follow_the_conventions() -> None:
    from robotlab.telemetry import provider_name

    assert provider_name("openai/gpt-4o-mini") == "openai"
    assert provider_name("anthropic/claude-sonnet-4-20250514") == "anthropic"
    assert provider_name("gemini/gemini-2.0-flash") == "gcp.gemini"
    assert provider_name("bedrock/anthropic.claude-3-5-haiku") == "aws.bedrock"
    assert provider_name("xai/grok-3-mini") == "x_ai"
    assert provider_name("gpt-4o-mini", llm=type("L", (), {"provider": "groq"})()) == "groq"
    assert provider_name(None) == "_OTHER"


class _Slow:
    """An LLM that waits, so a cancelled run has a model call in progress."""

    def __init__(self) -> None:
        self.started = asyncio.Event()

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        self.started.set()
        await asyncio.sleep(3600)
        return LLMResponse(content="never")


async def test_cancelled_run_ends_its_spans(spans: Recorder) -> None:
    llm = _Slow()
    robot = robotlab.build(name="slow", model=MODEL, llm=llm)
    task = asyncio.ensure_future(robot.arun("hi"))
    await asyncio.wait_for(llm.started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    agent = spans.one("invoke_agent slow")
    assert agent.status.status_code is StatusCode.ERROR
    assert agent.attributes is not None and agent.attributes["error.type"] == "asyncio.exceptions.CancelledError"
    assert spans.one(f"chat {MODEL}").end_time is not None


def test_server_tool_round_over_http(spans: Recorder) -> None:
    def respond(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] != "tool":
            return server_tool_calls(call("get_weather", location="Rome"))
        return reply("Warm.")

    with FakeLLMServer(responder=respond) as server:
        robot = robotlab.build(name="weather", model=MODEL, local_tools=[get_weather],
                               llm=robotlab.llm.OpenAICompatibleLLM(api_base=server.base_url, api_key="sk-fake"))
        assert robot.run("Weather in Rome?").reply == "Warm."
    assert [s.name for s in spans.spans()] == [f"chat {MODEL}", "execute_tool get_weather", f"chat {MODEL}",
                                               "invoke_agent weather"]


def test_a_span_of_the_caller_is_the_parent_of_a_sync_run(spans: Recorder) -> None:
    from opentelemetry import trace

    robot = robotlab.build(name="support", model=MODEL, llm=FakeLLM([text("Monday.")]))
    with trace.get_tracer("app").start_as_current_span("handle ticket") as outer:
        robot.run("Where is my invoice?")
    assert parent_of(spans.one("invoke_agent support")) == outer.get_span_context().span_id


def test_a_parked_run_is_not_an_error(spans: Recorder) -> None:
    from robotlab.tools import AskUser
    from robotlab.tools.parking import ParkingChannel, RunParked

    llm = FakeLLM([tool_call("robot_lab--ask_user", question="Which invoice?")])
    robot = robotlab.build(name="asker", model=MODEL, llm=llm, local_tools=[AskUser])
    robot.ask_channel = ParkingChannel()
    with pytest.raises(RunParked):
        robot.run("Refund my invoice")
    for span in (spans.one("invoke_agent asker"), spans.one("execute_tool robot_lab--ask_user")):
        assert span.status.status_code is StatusCode.UNSET
        assert span.attributes is not None
        assert span.attributes["robotlab.stopped_by"] == "robotlab.tools.parking.RunParked"
        assert "error.type" not in span.attributes
