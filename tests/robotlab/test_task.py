"""Task, FlowResult, extract_run_context and Robot.call (the network step)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotlab import hooks
from robotlab.config import configure, reload_config
from robotlab.errors import InferenceError
from robotlab.memory import Memory
from robotlab.result import RobotResult
from robotlab.robot import build
from robotlab.run_config import RunConfig
from robotlab.task import FlowResult, Task, deep_merge, extract_run_context
from robotlab.testing.fake import FakeLLM, raise_, text


@pytest.fixture(autouse=True)
def fresh_hooks() -> Iterator[None]:
    hooks.clear_hooks()
    yield
    hooks.clear_hooks()


def reply(robot_name: str, content: str) -> RobotResult:
    return RobotResult(robot_name=robot_name, output=[{"type": "text", "role": "assistant", "content": content}])


# -- deep merge (seed 002) --------------------------------------------------------------------
def test_deep_merge_merges_nested_dicts_and_replaces_lists() -> None:
    base = {"a": 1, "nested": {"x": 1, "deep": {"p": 1}, "items": [1, 2]}, "tags": ["a"]}
    override = {"nested": {"y": 2, "deep": {"q": 2}, "items": [3]}, "tags": ["b"], "a": {"now": "dict"}}
    merged = deep_merge(base, override)
    assert merged == {
        "a": {"now": "dict"},
        "nested": {"x": 1, "y": 2, "deep": {"p": 1, "q": 2}, "items": [3]},
        "tags": ["b"],
    }
    assert base["nested"] == {"x": 1, "deep": {"p": 1}, "items": [1, 2]}  # inputs untouched
    assert deep_merge({1: "a"}, {2: "b"}) == {"1": "a", "2": "b"}  # keys become str (Ruby symbolizes)


# -- Task -------------------------------------------------------------------------------------
def test_task_to_dict_is_compact_as_the_seed_shows() -> None:
    robot = build(name="billing_bot", llm=FakeLLM())
    task = Task(name="billing", robot=robot, context={"department": "billing"})
    assert task.to_dict() == {"name": "billing", "robot": "billing_bot", "context": {"department": "billing"},
                              "mcp": "none", "tools": "none"}
    with_memory = Task(name="b", robot=robot, memory={"k": 1}, config=RunConfig(temperature=0.0), network=object())
    assert with_memory.to_dict()["memory"] is True
    assert "config" not in with_memory.to_dict() and "network" not in with_memory.to_dict()
    assert Task(name="c", robot=robot, memory=Memory()).to_dict()["memory"] is True


def test_task_context_must_be_a_dict() -> None:
    with pytest.raises(TypeError, match="context must be a dict"):
        Task(name="t", robot=build(llm=FakeLLM()), context=["not", "a", "dict"])  # type: ignore[arg-type]


def test_enhanced_result_puts_the_task_settings_into_the_run_params() -> None:
    robot = build(name="r", llm=FakeLLM())
    network = object()
    network_config = RunConfig(temperature=0.5, tools=["a"])
    task = Task(name="t", robot=robot, context={"customer": {"tier": "gold"}, "tags": ["x"]}, mcp=["server"],
                tools=["lookup"], memory={"k": 1}, config=RunConfig(temperature=0.0), network=network)
    incoming = FlowResult("v", context={"run_params": {"message": "hi", "customer": {"id": 7}, "tags": ["y"],
                                                       "network_config": network_config}})
    params = task.enhanced_result(incoming).context["run_params"]
    assert params["customer"] == {"id": 7, "tier": "gold"} and params["tags"] == ["x"]
    assert params["mcp"] == ["server"] and params["tools"] == ["lookup"] and params["memory"] == {"k": 1}
    assert params["task"] is task and params["network"] is network
    assert params["network_config"].temperature == 0.0 and params["network_config"].tools == ["a"]
    assert network_config.temperature == 0.5  # merged into a new config
    assert incoming.context["run_params"]["tags"] == ["y"]  # the incoming result is unchanged


def test_enhanced_result_leaves_none_settings_out() -> None:
    task = Task(name="t", robot=build(llm=FakeLLM()))
    params = task.enhanced_result(FlowResult(None, context={"run_params": {"message": "hi"}})).context["run_params"]
    assert set(params) == {"message", "task"}
    off = Task(name="t", robot=build(llm=FakeLLM()), tools=[], config={"temperature": 0.2})
    params = off.enhanced_result(FlowResult(None, context={})).context["run_params"]
    assert params["tools"] == [] and params["network_config"] == RunConfig(temperature=0.2)


async def test_task_call_runs_the_robot_with_the_task_settings() -> None:
    llm = FakeLLM(["done"])
    robot = build(name="bot", llm=llm, local_tools=[lambda: None])
    task = Task(name="step", robot=robot, tools=[], memory={"seen": True})
    result = await task.call(FlowResult({"message": "go"}, context={"run_params": {"message": "go"}}))
    assert result.value.reply == "done" and result.context["bot"] is result.value
    assert llm.requests[0].tools == []  # tools=[] turned the robot's tools off
    assert robot.memory.get("seen") is True  # the dict was set into the run's memory


async def test_task_hooks_use_global_and_network_registries_never_the_robots() -> None:
    seen: list[str] = []

    class Recorder(hooks.Hook):
        @classmethod
        def before_task(cls, ctx: Any) -> None:
            seen.append(f"{cls.__name__}:{ctx.task_name}:{ctx.robot.name}")

    class GlobalRecorder(Recorder):
        pass

    class NetworkRecorder(Recorder):
        pass

    class RobotRecorder(Recorder):
        pass

    class FakeNetwork:
        memory = Memory()
        hooks = hooks.HookRegistry()

    network = FakeNetwork()
    hooks.on(GlobalRecorder)
    network.hooks.on(NetworkRecorder)
    robot = build(name="bot", llm=FakeLLM(["ok"]))
    robot.on(RobotRecorder)
    await Task(name="step", robot=robot, network=network).call(FlowResult(None, context={"run_params": {}}))
    assert seen == ["GlobalRecorder:step:bot", "NetworkRecorder:step:bot"]


async def test_task_per_run_hooks_come_from_the_run_params_and_reach_the_robot_run() -> None:
    seen: list[str] = []

    class PerRun(hooks.Hook):
        @classmethod
        def before_task(cls, ctx: Any) -> None:
            seen.append(f"task {ctx.task_name}")

        @classmethod
        def before_run(cls, ctx: Any) -> None:
            seen.append(f"run {ctx.robot.name}")

    robot = build(name="bot", llm=FakeLLM(["ok", "ok"]))
    params = {"message": "go", "hooks": (PerRun,)}
    await Task(name="step", robot=robot).call(FlowResult(params, context={"run_params": params}))
    assert seen == ["task step", "run bot"]
    await Task(name="step", robot=robot).call(FlowResult(None, context={"run_params": {"message": "go"}}))
    assert seen == ["task step", "run bot"]  # per-run: not there for the next run


# -- FlowResult -------------------------------------------------------------------------------
def test_flow_result_methods_return_new_results() -> None:
    start = FlowResult("v", context={"run_params": {}})
    assert start.is_continue and start.errors == {} and start.activated_steps == []
    moved = start.continue_("w").with_context("bot", 1).with_error("bot", "bad").with_error("bot", "worse")
    assert (moved.value, moved.context["bot"], moved.errors) == ("w", 1, {"bot": ["bad", "worse"]})
    assert (start.value, "bot" in start.context, start.errors) == ("v", False, {})
    activated = moved.activate("billing").activate(["technical", "general"])
    assert activated.activated_steps == ["billing", "technical", "general"] and moved.activated_steps == []
    halted = activated.halt()
    assert not halted.is_continue and halted.value == "w" and activated.is_continue
    assert halted.halt("x").value == "x" and halted.with_context("k", 1).is_continue is False
    assert halted.continue_(0).value == 0 and not halted.continue_(0).is_continue  # continue keeps the flag


def test_flow_result_replies_by_robot_name() -> None:
    result = FlowResult(None, context={"run_params": {"message": "m"}, "a": reply("a", "one"), "b": reply("b", "two")})
    assert result.replies == {"a": "one", "b": "two"}
    nested = FlowResult(None, context={"inner": result.continue_(reply("b", "final")), "c": "not a result"})
    assert nested.replies == {"inner": "final"}  # a nested network's entry gives its final reply


# -- extract_run_context (section 2.7) ----------------------------------------------------------
def test_extract_run_context_from_each_kind_of_value() -> None:
    memory = Memory()
    params = {"message": "original", "user_id": 7, "network_memory": memory, "tools": ["a"]}

    def extract(value: Any) -> tuple[Any, dict[str, Any]]:
        return extract_run_context(FlowResult(value, context={"run_params": params}))

    assert extract(params) == ("original", {"user_id": 7, "network_memory": memory, "tools": ["a"]})
    assert extract(reply("up", "upstream reply"))[0] == "upstream reply"
    assert extract("a string")[0] == "a string"
    assert extract(42)[0] == "42"
    assert extract(None)[0] == "original"
    message, options = extract({"message": "from value", "extra": 1, "tools": ["ignored"]})
    assert message == "from value" and options["extra"] == 1 and options["tools"] == ["a"]  # specials from params
    assert extract_run_context(FlowResult(None)) == (None, {})


# -- Robot.call ---------------------------------------------------------------------------------
async def test_robot_call_keys_the_result_by_robot_name_and_continues() -> None:
    robot = build(name="writer", llm=FakeLLM(["a draft"]))
    incoming = FlowResult(reply("analyst", "the analysis"), context={"run_params": {"message": "orig"}})
    result = await robot.call(incoming)
    assert result.context["writer"] is result.value and result.value.reply == "a draft"
    assert result.is_continue and result.value.duration is not None
    assert robot.messages[0] == {"role": "user", "content": "the analysis"}  # the upstream reply is the message


async def test_robot_call_turns_any_exception_into_an_error_result() -> None:
    robot = build(name="fragile", llm=FakeLLM([raise_(InferenceError("provider down")), raise_(KeyError("k"))]))
    incoming = FlowResult({"message": "hi"}, context={"run_params": {"message": "hi"}})
    result = await robot.call(incoming)
    assert result.value.reply == "Error: InferenceError: provider down"
    assert result.value.robot_name == "fragile" and result.value.duration is not None
    assert result.context["fragile"] is result.value and result.is_continue
    assert (await robot.call(incoming)).value.reply == "Error: KeyError: 'k'"


async def test_robot_call_passes_run_options_to_the_run_and_nothing_else_without_a_template() -> None:
    chunks: list[Any] = []
    events: list[Any] = []
    plain = build(name="plain", llm=FakeLLM(["ok"]))
    params = {"message": "hi", "customer": "Ada", "run_id": "not an option", "on_content": chunks.append,
              "on_event": events.append}
    result = await plain.call(FlowResult(params, context={"run_params": params}))
    assert result.value.reply == "ok"  # extra params are not an error without a template
    assert "".join(c.content for c in chunks) == "ok"
    assert events[0].kind == "run.started" and events[0].run_id != "not an option"


async def test_robot_call_passes_run_params_as_template_parameters_only_with_a_template(tmp_path: Path) -> None:
    params = {"message": "hi", "customer": "Ada", "run_id": "not a template parameter"}
    (tmp_path / "greeter.md").write_text("---\nparameters:\n  customer: null\n---\nGreet {{ customer }}.\n")
    configure(template_path=str(tmp_path))
    try:
        llm = FakeLLM([text("hello Ada")])
        templated = build(name="greeter", template="greeter", llm=llm)
        await templated.call(FlowResult(params, context={"run_params": params}))
        assert llm.requests[0].messages[0] == {"role": "system", "content": "Greet Ada."}
    finally:
        reload_config()
