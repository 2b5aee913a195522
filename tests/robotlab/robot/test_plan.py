"""A run is planned once, by a pure function of what it is given (issue 32, item 5)."""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.budget import Budget
from robotlab.config import get_config, reload_config
from robotlab.errors import ConfigurationError
from robotlab.llm import AutoLLM
from robotlab.mcp.management import MCPToolset
from robotlab.robot import RobotKwargs, RobotOptions, build
from robotlab.robot.conversation import Conversation
from robotlab.robot.learnings import Learnings
from robotlab.robot.mailbox import Mailbox
from robotlab.robot.persona import Persona
from robotlab.robot.plan import RunOptions, ToolChoice, plan_run
from robotlab.robot.request import RunCallbacks
from robotlab.run_config import RunConfig
from robotlab.streaming import Chunk
from robotlab.testing.fake import FakeLLM
from robotlab.tools import Tool, tool


@pytest.fixture(autouse=True)
def fresh_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("ROBOT_LAB_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return order_id


@tool
def refund(order_id: str) -> str:
    """Refund an order."""
    return order_id


def _plan(config: RunConfig, options: RunOptions | None = None, **given: Any) -> Any:
    values: dict[str, Any] = {"robot_name": "clerk", "provider": None, "llm": FakeLLM([]), "extra_params": {},
                              "callbacks": RunCallbacks(), "defaults": get_config(), **given}
    return plan_run(config, options or RunOptions(), **values)


def test_a_run_is_planned_from_what_it_is_given_without_a_robot() -> None:
    own: list[Chunk] = []
    this_run: list[Chunk] = []
    server = {"name": "notes", "transport": {"type": "stdio", "command": "notes-server"}}
    config = RunConfig(model="m/1", temperature=0.0, tools=["lookup"], mcp=[server], max_tool_rounds=3,
                       doom_loop_threshold=5)
    plan = _plan(config, RunOptions(on_content=this_run.append), extra_params={"seed": 7},
                 callbacks=RunCallbacks(content=[own.append]))
    assert plan.model == "m/1"
    assert plan.params == {"temperature": 0.0, "seed": 7}
    assert plan.mcp_servers == [server]
    assert plan.tools == ToolChoice(allowed=("lookup",))
    assert plan.callbacks.content == [own.append, this_run.append]
    assert (plan.max_tool_rounds, plan.doom_loop_threshold) == (3, 5)


def test_the_run_and_the_network_are_levels_of_the_hierarchies() -> None:
    inherit = RunConfig(tools="inherit", mcp="inherit")
    server = {"name": "notes", "transport": {"type": "stdio", "command": "notes-server"}}
    from_network = _plan(inherit, RunOptions(network_config=RunConfig(tools=["refund"], mcp=[server])))
    assert from_network.tools == ToolChoice(allowed=("refund",)) and from_network.mcp_servers == [server]
    assert _plan(inherit, RunOptions(tools=["lookup"])).tools == ToolChoice(allowed=("lookup",))
    assert _plan(inherit, RunOptions(tools="none")).tools == ToolChoice(none=True)
    assert _plan(RunConfig(), RunOptions(mcp="none")).mcp_servers == []


def test_the_model_takes_the_provider_and_the_limits_their_defaults() -> None:
    plan = _plan(RunConfig(model="llama3", max_tools=1), provider="ollama")
    assert plan.model == "ollama/llama3"
    assert plan.max_tool_rounds == get_config().max_tool_rounds and plan.tools.limit == 1


def test_a_real_transport_without_a_model_is_refused_when_planned() -> None:
    with pytest.raises(ConfigurationError, match="No LLM model configured"):
        _plan(RunConfig(), llm=AutoLLM())
    assert _plan(RunConfig()).model is None  # a fake model needs no name


def test_the_plan_makes_the_loop_s_request_with_the_tools_it_chose(caplog: pytest.LogCaptureFixture) -> None:
    plan = _plan(RunConfig(model="m/1", max_tools=1))
    conversation, budget = Conversation(), Budget(robot_name="clerk")
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        request = plan.request("hi", conversation, available_tools=[lookup, refund], budget=budget)
    assert [t.name for t in request.tools] == ["lookup"]
    assert "Robot 'clerk': 2 tools exceed max_tools (1); dropping refund" in caplog.text
    assert (request.robot_name, request.request_text, request.model) == ("clerk", "hi", "m/1")
    assert request.conversation is conversation and request.budget is budget
    assert request.params == plan.params and request.params is not plan.params


def test_a_robot_runs_what_its_plan_says() -> None:
    llm = FakeLLM(["done"])
    robot = build(name="clerk", model="m/1", llm=llm, local_tools=[lookup, refund], tools=["refund"],
                  temperature=0.3)
    assert robot.run("go").reply == "done"
    sent = llm.requests[0]
    assert [schema["function"]["name"] for schema in sent.tools] == ["refund"]
    assert sent.model == "m/1" and sent.params == {"temperature": 0.3}


@pytest.mark.parametrize("part", [Conversation, Persona, Learnings, Mailbox, MCPToolset])
def test_the_parts_of_a_robot_are_not_given_the_robot_class(part: type) -> None:
    # each part receives what it uses (a name, a conversation, a memory), described by a protocol
    annotations = [str(p.annotation) for p in inspect.signature(part.__init__).parameters.values()]
    assert not [a for a in annotations if "Robot" in a], annotations


def test_the_plan_is_not_given_the_robot() -> None:
    annotations = [str(p.annotation) for p in inspect.signature(plan_run).parameters.values()]
    assert not [a for a in annotations if "Robot" in a], annotations


def test_the_typed_keywords_are_the_options() -> None:
    assert list(RobotKwargs.__annotations__) == [f.name for f in dataclasses.fields(RobotOptions)]


def test_tools_built_for_the_robot_still_get_it() -> None:
    class Mine(Tool):
        """A tool that knows its robot."""

        name = "mine"

        def execute(self) -> str:
            return "ok"

    robot = build(name="clerk", llm=FakeLLM([]), local_tools=[Mine])
    assert robot.local_tools[0].robot is robot
