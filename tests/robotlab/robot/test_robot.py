from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotlab.config import configure, reload_config
from robotlab.errors import BudgetExceeded, ConfigurationError, InferenceError, ToolLoopError
from robotlab.llm import AutoLLM
from robotlab.robot import DEFAULT_MAX_TOOLS, Robot, RobotOptions, build
from robotlab.streaming import Chunk
from robotlab.testing.fake import FakeLLM, raise_, text, tool_call, tool_calls
from robotlab.tools import Tool, tool
from robotlab.tools.manifest import tool_registry


@pytest.fixture(autouse=True)
def fresh_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("ROBOT_LAB_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


@tool
def get_weather(location: str) -> dict[str, Any]:
    """Current weather for a location."""
    return {"location": location, "temp_c": 21}


@tool
def get_time(zone: str = "UTC") -> str:
    """Current time in a zone."""
    return f"12:00 {zone}"


def test_simple_run_returns_reply_and_records_request() -> None:
    llm = FakeLLM([text("Hello there", usage=(12, 3))])
    robot = build(name="helper", system_prompt="You are helpful.", llm=llm)
    result = robot.run("Hi")
    assert result.reply == "Hello there"
    assert result.robot_name == "helper"
    assert (result.input_tokens, result.output_tokens) == (12, 3)
    assert result.stop_reason == "stop"
    assert result.is_stopped
    assert result.duration is not None and result.duration >= 0
    request = llm.requests[0]
    assert request.messages == [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"}]
    assert request.tools == []


def test_tool_round_trip_sends_results_back_and_collects_tool_calls() -> None:
    llm = FakeLLM(
        [tool_calls(("get_weather", {"location": "Paris"}, "c1"), ("get_time", {}, "c2")), text("Sunny, noon.")]
    )
    seen_calls: list[Any] = []
    seen_results: list[Any] = []
    robot = build(
        name="w",
        llm=llm,
        local_tools=[get_weather, get_time],
        on_tool_call=seen_calls.append,
        on_tool_result=seen_results.append,
    )
    result = robot.run("Weather and time?")
    assert result.reply == "Sunny, noon."
    assert [c.name for c in seen_calls] == ["get_weather", "get_time"]
    assert seen_calls[0].arguments == {"location": "Paris"}
    assert seen_results == [{"location": "Paris", "temp_c": 21}, "12:00 UTC"]
    second = llm.requests[1].messages
    assert second[-2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "name": "get_weather",
        "content": '{"location": "Paris", "temp_c": 21}',
    }
    assert second[-1]["content"] == "12:00 UTC"
    assert [t.tool.name for t in result.tool_calls] == ["get_weather", "get_time"]
    assert result.has_tool_calls
    assert {t["function"]["name"] for t in llm.requests[0].tools} == {"get_weather", "get_time"}


def test_history_persists_across_runs_and_can_be_cleared_or_replaced() -> None:
    llm = FakeLLM(["one", "two", "three"])
    robot = build(llm=llm, system_prompt="S")
    robot.run("first")
    robot.run("second")
    assert [m["content"] for m in robot.messages] == ["first", "one", "second", "two"]
    assert llm.requests[1].messages[1:] == robot.messages[:3]
    robot.clear_messages()
    assert robot.messages == []
    assert robot.instructions == "S"
    robot.replace_messages(
        [{"role": "system", "content": "T"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    )
    assert robot.instructions == "T"
    robot.run("next")
    assert llm.requests[2].messages[0] == {"role": "system", "content": "T"}
    assert [m["content"] for m in llm.requests[2].messages[1:]] == ["q", "a", "next"]
    robot.clear_messages(keep_system=False)
    assert robot.instructions is None
    with pytest.raises(ConfigurationError, match="invalid role 'robot'"):
        robot.replace_messages([{"role": "robot", "content": "x"}])


def test_options_may_come_as_one_robot_options_object_that_keywords_override() -> None:
    options = RobotOptions(name="clerk", system_prompt="Be brief.", temperature=0.2, llm=FakeLLM(["ok"]))
    robot = Robot(options, temperature=0.7)
    assert (robot.name, robot.instructions, robot.config.temperature) == ("clerk", "Be brief.", 0.7)
    assert options.temperature == 0.2  # the object given is not changed
    assert robot.run("hi").reply == "ok"
    with pytest.raises(ConfigurationError, match=r"Unknown robot option\(s\): colour\. Valid options: "):
        Robot(options, colour="red")


def test_unknown_build_option_is_a_configuration_error() -> None:
    with pytest.raises(
        ConfigurationError, match=r"Unknown robot option\(s\): temprature\. Valid options: .*temperature"
    ):
        build(temprature=0.2)


def test_tools_filter_at_build_must_be_names() -> None:
    with pytest.raises(ConfigurationError, match="attach tool objects with local_tools="):
        build(tools=[get_weather])


def test_local_tools_accept_functions_and_classes() -> None:
    def plain(x: int) -> int:
        """Double it."""
        return 2 * x

    class Echo(Tool):
        def execute(self, value: str) -> str:
            return value

    robot = build(local_tools=[plain, Echo])
    assert [t.name for t in robot.local_tools] == ["plain", "echo"]
    assert robot.local_tools[1].robot is robot
    with pytest.raises(ConfigurationError, match="local_tools entries must be"):
        build(local_tools=[42])


def test_run_inherits_tools_by_default_and_none_turns_them_off() -> None:
    llm = FakeLLM(default="ok")
    robot = build(llm=llm, local_tools=[get_weather, get_time])
    robot.run("a")
    robot.run("b", tools="none")
    robot.run("c", tools=["get_time"])
    robot.run("d", tools=[])
    names = [[t["function"]["name"] for t in r.tools] for r in llm.requests]
    assert names == [["get_weather", "get_time"], [], ["get_time"], []]


def test_tools_hierarchy_truth_table() -> None:
    robot_unset = build(local_tools=[get_weather])
    robot_inherit = build(local_tools=[get_weather], tools="inherit")
    robot_none = build(local_tools=[get_weather], tools="none")
    robot_list = build(local_tools=[get_weather, get_time], tools=["get_time"])
    names = lambda tools: [t.name for t in tools]  # noqa: E731
    assert names(robot_unset.resolve_tools("none")) == []
    assert names(robot_unset.resolve_tools("inherit")) == ["get_weather"]
    # build-time "inherit" on a standalone robot inherits the global "none" -> nothing (seed rule)
    assert names(robot_inherit.resolve_tools("inherit")) == []
    assert names(robot_none.resolve_tools("inherit")) == ["get_weather"]
    assert names(robot_list.resolve_tools("inherit")) == ["get_time"]
    # runtime wins over build
    assert names(robot_list.resolve_tools(["get_weather"])) == ["get_weather"]
    # a network config is the parent of build-time "inherit"
    from robotlab.run_config import RunConfig

    assert names(robot_inherit.resolve_tools("inherit", network_config=RunConfig(tools=["get_weather"]))) == [
        "get_weather"
    ]
    configure(tools=["get_weather"])
    assert names(robot_inherit.resolve_tools("inherit")) == ["get_weather"]


def test_tool_cap_drops_extra_tools(caplog: pytest.LogCaptureFixture) -> None:
    many = [Tool.create(name=f"t{i}", handler=lambda a: "x") for i in range(DEFAULT_MAX_TOOLS + 2)]
    robot = build(local_tools=many)
    assert len(robot.resolve_tools()) == DEFAULT_MAX_TOOLS
    assert "exceed max_tools (128)" in caplog.text


def test_bad_tool_calls_become_tool_errors_and_the_run_goes_on() -> None:
    llm = FakeLLM(
        [
            tool_calls(
                ("get_weather", None, "a", '{"location": '), ("nope", {}, "b"), ("get_weather", {"city": 1}, "c")
            ),
            text("Sorry."),
        ]
    )
    robot = build(llm=llm, local_tools=[get_weather])
    result = robot.run("?")
    assert result.reply == "Sorry."
    contents = [m["content"] for m in llm.requests[1].messages if m["role"] == "tool"]
    assert contents[0].startswith("Error (get_weather): arguments are not valid JSON")
    assert contents[1] == "Error (nope): unknown tool 'nope'. Available tools: get_weather"
    assert contents[2].startswith("Error (get_weather): invalid arguments: location: Field required")
    assert [t.is_error for t in result.tool_calls] == [True, True, True]


def test_max_tool_rounds_counts_tool_calls_and_keeps_history_valid() -> None:
    llm = FakeLLM([tool_call("get_time"), tool_calls("get_time", "get_time"), text("never")])
    robot = build(llm=llm, local_tools=[get_time], max_tool_rounds=2)
    with pytest.raises(
        ToolLoopError, match=r"^Circuit breaker triggered: 3 tool calls exceeded max_tool_rounds \(2\)$"
    ):
        robot.run("loop")
    calls = [c["id"] for m in robot.messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in robot.messages if m["role"] == "tool"]
    assert calls == answered


def test_the_circuit_breaker_error_carries_its_context() -> None:
    robot = build(name="looper", model="fake/m", llm=FakeLLM([tool_calls("get_time", "get_time")]),
                  local_tools=[get_time], max_tool_rounds=1)
    with pytest.raises(ToolLoopError) as info:
        robot.run("loop")
    assert (info.value.robot_name, info.value.limit, info.value.usage, info.value.model) == ("looper", 1, 2, "fake/m")


def test_doom_loop_warning_is_appended_and_never_raises() -> None:
    llm = FakeLLM([tool_call("get_time"), tool_call("get_time"), tool_call("get_time"), text("done")])
    robot = build(llm=llm, local_tools=[get_time])
    assert robot.run("t").reply == "done"
    tool_texts = [m["content"] for m in robot.messages if m["role"] == "tool"]
    assert tool_texts[:2] == ["12:00 UTC", "12:00 UTC"]
    assert tool_texts[2].startswith("12:00 UTC\n\n⚠️ Tool 'get_time' has been called 3+ times consecutively")


def test_doom_loop_warning_on_dict_results() -> None:
    llm = FakeLLM([tool_call("get_weather", location="x")] * 2 + [text("ok")])
    robot = build(llm=llm, local_tools=[get_weather], doom_loop_threshold=2)
    robot.run("x")
    assert '"_doom_loop_warning": "Tool \'get_weather\' has been called 2+ times' in robot.messages[-2]["content"]


def test_token_budget_stops_the_run_that_overspends() -> None:
    llm = FakeLLM([tool_call("get_time", usage=(60, 10)), text("done", usage=(60, 10))])
    robot = build(llm=llm, local_tools=[get_time], token_budget=100)
    with pytest.raises(InferenceError, match=r"^Token budget exceeded: 140 tokens used, budget is 100$"):
        robot.run("x")
    assert robot.budget_ledger is not None
    assert robot.budget_ledger.consumed["tokens"] == 140
    with pytest.raises(BudgetExceeded, match="budget exceeded for tokens"):
        robot.run("again")


def test_a_budget_stop_is_budget_exceeded_with_its_context() -> None:
    robot = build(name="frugal", llm=FakeLLM([text("a", usage=(70, 50))]), token_budget=100)
    with pytest.raises(BudgetExceeded, match=r"^Token budget exceeded: 120 tokens used, budget is 100$") as info:
        robot.run("x")
    assert (info.value.robot_name, info.value.dimension, info.value.limit, info.value.usage) == ("frugal", "tokens",
                                                                                                 100, 120)
    assert isinstance(info.value, InferenceError)  # what callers caught before
    costly = build(name="costly", llm=FakeLLM([text("a", cost=0.02)]), cost_budget=0.01)
    with pytest.raises(BudgetExceeded, match=r"^Cost budget exceeded") as info:
        costly.run("x")
    assert (info.value.robot_name, info.value.dimension, info.value.limit, info.value.usage) == ("costly", "cost",
                                                                                                 0.01, 0.02)
    with pytest.raises(BudgetExceeded, match="^budget exceeded for cost: ") as info:
        costly.run("again")  # the ledger refuses the reservation
    assert (info.value.robot_name, info.value.dimension, info.value.limit) == ("costly", "cost", 0.01)


def test_building_a_robot_leaves_the_global_tool_registry_alone() -> None:
    saved = tool_registry.values
    tool_registry.clear()
    try:
        robot = build(llm=FakeLLM([tool_call("get_time"), text("noon")]), local_tools=[get_time])
        assert tool_registry.names == []
        assert robot.run("time?").tool_calls[0].tool.name == "get_time"  # looked up among its own tools
    finally:
        tool_registry.replace(saved)


def test_token_budget_exactly_at_limit_passes() -> None:
    robot = build(llm=FakeLLM([text("a", usage=(50, 50)), text("b", usage=(1, 0))]), token_budget=100)
    assert robot.run("x").reply == "a"
    with pytest.raises(InferenceError, match="Token budget exceeded: 101 tokens used"):
        robot.run("y")


def test_cost_budget_message() -> None:
    robot = build(llm=FakeLLM([text("a", cost=0.02)]), cost_budget=0.01)
    with pytest.raises(InferenceError, match=r"^Cost budget exceeded: \$0\.020000 used, budget is \$0\.010000$"):
        robot.run("x")


def test_token_totals_accumulate_and_reset() -> None:
    robot = build(llm=FakeLLM([text("a", usage=(3, 4)), text("b", usage=(5, 6))]))
    robot.run("1")
    robot.run("2")
    assert (robot.total_input_tokens, robot.total_output_tokens) == (8, 10)
    robot.reset_token_totals()
    assert (robot.total_input_tokens, robot.total_output_tokens) == (0, 0)


def test_streaming_callbacks_fire_in_order_stored_first() -> None:
    order: list[str] = []
    robot = build(llm=FakeLLM([text("one two three")]), on_content=lambda c: order.append(f"stored:{c.content}"))
    result = robot.run("go", on_content=lambda c: order.append(f"call:{c.content}"))
    assert order == ["stored:one ", "call:one ", "stored:two ", "call:two ", "stored:three", "call:three"]
    assert result.reply == "one two three"


def test_on_content_decorator_registers() -> None:
    robot = build(llm=FakeLLM(["a b"]))
    chunks: list[Chunk] = []
    robot.on_content(chunks.append)
    robot.run("x")
    assert "".join(c.content for c in chunks) == "a b"


def test_stream_yields_events_in_order() -> None:
    robot = build(llm=FakeLLM([tool_call("get_time", id="t1"), text("It is noon")]), local_tools=[get_time])
    events = list(robot.stream("time?"))
    kinds = [e.kind for e in events]
    assert kinds[0] == "run.started"
    assert kinds[-2:] == ["run.completed", "stream.ended"]
    assert "tool_call.started" in kinds and "tool_call.completed" in kinds
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.run_id for e in events}) == 1
    assert "".join(e.data["text"] for e in events if e.kind == "text.delta") == "It is noon"
    completed = next(e for e in events if e.kind == "tool_call.completed")
    assert completed.data == {"id": "t1", "name": "get_time", "result": "12:00 UTC", "is_error": False}


def test_stream_failure_emits_run_failed_then_raises() -> None:
    robot = build(llm=FakeLLM([raise_(InferenceError("provider down"))]))
    seen: list[str] = []
    with pytest.raises(InferenceError, match="provider down"):
        for event in robot.stream("x"):
            seen.append(event.kind)
    assert seen == ["run.started", "run.failed", "stream.ended"]


async def test_arun_and_astream_in_an_event_loop() -> None:
    robot = build(llm=FakeLLM(["first", "second"]))
    assert (await robot.arun("a")).reply == "first"
    kinds = [event.kind async for event in robot.astream("b")]
    assert kinds[0] == "run.started" and kinds[-1] == "stream.ended"


async def test_concurrent_robots_run_in_parallel() -> None:
    class SlowLLM(FakeLLM):
        async def complete(self, request: Any, *, on_text: Any = None) -> Any:
            await asyncio.sleep(0.05)
            return await super().complete(request, on_text=on_text)

    robots = [build(name=f"r{i}", llm=SlowLLM(["ok"])) for i in range(5)]
    results = await asyncio.wait_for(asyncio.gather(*(r.arun("x") for r in robots)), timeout=0.2)
    assert [r.robot_name for r in results] == [f"r{i}" for i in range(5)]


def test_template_and_system_prompt(tmp_path: Path) -> None:
    (tmp_path / "helper.md").write_text(
        "---\nrobot_name: helper_bot\ndescription: Helps\nmodel: openai/gpt-4o-mini\ntemperature: 0.0\n"
        "max_tokens: 0\nparameters:\n  tone: friendly\n---\nBe {{ tone }}.\n"
    )
    configure(template_path=str(tmp_path))
    llm = FakeLLM(default="ok")
    robot = build(template="helper", system_prompt="Extra rule.", llm=llm)
    assert robot.name == "helper_bot"
    assert robot.description == "Helps"
    assert robot.model == "openai/gpt-4o-mini"
    assert robot.instructions == "Be friendly.\n\nExtra rule."
    robot.run("x")
    assert llm.requests[0].params == {"temperature": 0.0, "max_tokens": 0}
    assert llm.requests[0].model == "openai/gpt-4o-mini"
    named = build(name="mine", template="helper", description="Mine", model="other/model", llm=llm)
    assert (named.name, named.description, named.model) == ("mine", "Mine", "other/model")
    robot.run("y", tone="stern")
    assert llm.requests[-1].messages[0]["content"] == "Be stern.\n\nExtra rule."


def test_template_with_missing_parameters_defers_then_errors(tmp_path: Path) -> None:
    (tmp_path / "need.md").write_text("---\nparameters:\n  who: null\n---\nHello {{ who }}")
    configure(template_path=str(tmp_path))
    llm = FakeLLM(default="ok")
    robot = build(template="need", llm=llm)
    assert robot.instructions is None
    with pytest.raises(ConfigurationError, match="missing required parameters: who"):
        robot.run("x")
    robot.run("x", who="Ada")
    assert llm.requests[-1].messages[0] == {"role": "system", "content": "Hello Ada"}


def test_missing_template_is_a_configuration_error(tmp_path: Path) -> None:
    configure(template_path=str(tmp_path))
    with pytest.raises(ConfigurationError, match="Template 'ghost' not found"):
        build(template="ghost")


def test_run_kwargs_without_template_are_rejected() -> None:
    robot = build(llm=FakeLLM(["x"]))
    with pytest.raises(ConfigurationError, match=r"Unknown run option\(s\): colour"):
        robot.run("x", colour="red")


def test_no_model_and_no_key_names_what_to_set() -> None:
    robot = build()
    assert isinstance(robot.llm, AutoLLM)  # the default transport (llm_transport)
    with pytest.raises(ConfigurationError, match="No LLM model configured"):
        robot.run("x")


def test_model_resolution_order(monkeypatch: pytest.MonkeyPatch) -> None:
    assert build().model is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-x")
    assert build().model == "openai/gpt-4o-mini"
    monkeypatch.setenv("ROBOT_LAB_MODEL", "anthropic/claude-x")
    reload_config()
    assert build().model == "anthropic/claude-x"
    assert build(model="m/explicit").model == "m/explicit"
    assert build(model="llama3", provider="ollama").model == "ollama/llama3"


def test_zero_values_are_sent() -> None:
    llm = FakeLLM(["x"])
    build(llm=llm, temperature=0.0, max_tokens=0, top_p=1.0).run("x")
    assert llm.requests[0].params == {"temperature": 0.0, "max_tokens": 0, "top_p": 1.0}


def test_with_chaining_returns_self() -> None:
    llm = FakeLLM(["x"])
    robot = build(llm=llm)
    chained = (
        robot.with_model("m/1")
        .with_temperature(0.3)
        .with_instructions("I")
        .with_tool(get_time)
        .with_params(seed=7)
        .with_headers(X_Test="1")
    )
    assert chained is robot
    robot.run("q")
    request = llm.requests[0]
    assert request.model == "m/1"
    assert request.params == {"temperature": 0.3, "seed": 7, "extra_headers": {"X_Test": "1"}}
    assert request.messages[0] == {"role": "system", "content": "I"}
    assert [t["function"]["name"] for t in request.tools] == ["get_time"]
    robot.with_instructions("more", replace=False)
    assert robot.instructions == "I\n\nmore"


def test_update_and_to_dict() -> None:
    robot = build(name="r", description="d", local_tools=[get_time], model="m/1")
    robot.update(system_prompt="New", temperature=0.5)
    assert robot.instructions == "New"
    data = robot.to_dict()
    assert data["name"] == "r"
    assert data["local_tools"] == ["get_time"]
    assert data["config"]["temperature"] == 0.5
    assert "bus" not in data
    assert robot.effective_config["model"] == "m/1"


def test_runnable_protocol() -> None:
    robot = build(name="solo")
    assert robot.crew == [robot]
    assert robot.chief is robot
    assert robot.robot_count == 1
    assert robot.is_single and not robot.is_network


def test_robot_direct_constructor_matches_build() -> None:
    assert isinstance(build(), Robot)
    assert build().name == "robot"


def test_tools_none_argument_means_the_robot_setting() -> None:
    robot = build(local_tools=[get_weather, get_time], tools=["get_time"])
    assert [t.name for t in robot.resolve_tools(None)] == ["get_time"]


# -- template skills ---------------------------------------------------------------------

@pytest.fixture
def skill_templates(tmp_path: Path) -> Iterator[Path]:
    """A template directory, and an empty AgentSkill catalog so every skill id is a template."""
    from robotlab.agent_skill import AgentSkillCatalog

    folder = tmp_path / "prompts"
    folder.mkdir()
    configure(template_path=str(folder), skills_path=str(tmp_path / "no-agent-skills"))
    AgentSkillCatalog.reset()
    yield folder
    AgentSkillCatalog.reset()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "robotlab"]


def test_template_skills_expand_depth_first_before_the_template(skill_templates: Path) -> None:
    (skill_templates / "base_rules.md").write_text("Never share secrets.")
    (skill_templates / "persona.md").write_text("---\nskills: [base_rules]\n---\nYou are Robbie.")
    (skill_templates / "tone.md").write_text("---\nskills: base_rules_extra\n---\nBe warm.")
    (skill_templates / "base_rules_extra.md").write_text("Keep it short.")
    (skill_templates / "main.md").write_text("---\nskills: [tone, persona]\n---\nHelp with {{ topic }}.")
    llm = FakeLLM(["ok"])
    robot = build(template="main", skills=["persona"], context={"topic": "billing"}, system_prompt="Inline.",
                  llm=llm)
    assert robot.skills == ["persona", "tone"]
    assert robot.instructions == (
        "Never share secrets.\n\nYou are Robbie.\n\nKeep it short.\n\nBe warm.\n\nHelp with billing.\n\nInline."
    )
    robot.run("hi")
    assert llm.requests[0].messages[0]["content"] == robot.instructions


def test_template_skills_without_a_template(skill_templates: Path) -> None:
    (skill_templates / "persona.md").write_text("---\nparameters:\n  company: Acme\n---\nYou work for {{ company }}.")
    llm = FakeLLM(["a", "b"])
    robot = build(skills=["persona"], system_prompt="Be brief.", llm=llm)
    assert robot.instructions == "You work for Acme.\n\nBe brief."
    robot.run("x", company="Initech")
    assert llm.requests[0].messages[0]["content"] == "You work for Initech.\n\nBe brief."


def test_skill_cycle_is_a_warning(skill_templates: Path, caplog: pytest.LogCaptureFixture) -> None:
    (skill_templates / "a.md").write_text("---\nskills: [b]\n---\nA.")
    (skill_templates / "b.md").write_text("---\nskills: [a, main]\n---\nB.")
    (skill_templates / "main.md").write_text("Main.")
    with caplog.at_level("WARNING", logger="robotlab"):
        robot = build(name="looper", template="main", skills=["a"], llm=FakeLLM(["ok"]))
    assert robot.instructions == "B.\n\nA.\n\nMain."
    assert _warnings(caplog) == [
        "Robot 'looper': skill cycle detected at 'a', skipping",
        "Robot 'looper': skill cycle detected at 'main', skipping",
    ]
    assert robot.run("x").reply == "ok"


def test_skill_front_matter_accumulates_and_the_constructor_wins(skill_templates: Path) -> None:
    (skill_templates / "careful.md").write_text(
        "---\ndescription: Careful\nmodel: openai/gpt-4o\ntemperature: 0.1\nmax_tokens: 50\n---\nCareful."
    )
    (skill_templates / "main.md").write_text("---\ntemperature: 0.5\n---\nMain.")
    robot = build(template="main", skills=["careful"], llm=FakeLLM(["ok"]))
    assert (robot.model, robot.config.temperature, robot.config.max_tokens) == ("openai/gpt-4o", 0.5, 50)
    assert robot.description == "Careful"
    (skill_templates / "described.md").write_text("---\ndescription: Main one\n---\nMain.")
    later = build(template="described", skills=["careful"], llm=FakeLLM(["ok"]))
    assert later.description == "Main one"
    mine = build(template="main", skills=["careful"], temperature=0.9, description="Mine", model="x/y")
    assert (mine.model, mine.config.temperature, mine.description) == ("x/y", 0.9, "Mine")


def test_a_skill_that_is_neither_agent_skill_nor_template(skill_templates: Path) -> None:
    with pytest.raises(ConfigurationError, match="Template 'ghost' not found"):
        build(skills=["ghost"])


def test_main_template_with_missing_parameters_still_errors_with_skills(skill_templates: Path) -> None:
    (skill_templates / "persona.md").write_text("You are Robbie.")
    (skill_templates / "need.md").write_text("---\nparameters:\n  who: null\n---\nHello {{ who }}")
    llm = FakeLLM(["ok"])
    robot = build(template="need", skills=["persona"], llm=llm)
    assert robot.instructions == "You are Robbie."
    with pytest.raises(ConfigurationError, match="missing required parameters: who"):
        robot.run("x")
    robot.run("x", who="Ada")
    assert llm.requests[0].messages[0]["content"] == "You are Robbie.\n\nHello Ada"
