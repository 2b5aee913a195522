"""A tool whose first parameter is annotated ``RunContext`` receives the run's context (issue 27, item 1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import pytest

import robotlab
from robotlab import RunContext, Tool, build, tool
from robotlab.network import create_network
from robotlab.robot.request import RunUsage
from robotlab.testing import FakeLLM, text, tool_call


@dataclass(frozen=True)
class Shop:
    """The deps of the tests' runs."""

    user: str


seen: list[RunContext[Any]] = []


@tool
def my_orders(ctx: RunContext[Shop], status: str) -> str:
    """The user's orders with this status.

    Args:
        status: The orders' status.
    """
    seen.append(ctx)
    return f"{ctx.deps.user}: 2 {status} orders"


@tool
async def my_total(ctx: RunContext[Shop]) -> str:
    """The total the user spent."""
    seen.append(ctx)
    return f"{ctx.deps.user} spent 40"


class Refund(Tool):
    """Refund an order."""

    def execute(self, ctx: RunContext[Shop], order: int) -> str:
        seen.append(ctx)
        return f"refunded {order} for {ctx.deps.user}"


@tool
def plain(status: str) -> str:
    """A tool that takes no context."""
    return f"plain {status}"


@pytest.fixture(autouse=True)
def _clear_seen() -> None:
    seen.clear()


def test_a_sync_tool_gets_the_runs_deps_id_robot_and_usage() -> None:
    llm = FakeLLM([tool_call("my_orders", status="open", usage=(10, 3)), text("done", usage=(20, 4))])
    robot = build(name="shopper", llm=llm, local_tools=[my_orders])
    result = robot.run("my open orders?", deps=Shop("alice"), run_id="run-1")
    assert result.reply == "done"
    assert result.tool_calls[0].content == {"data": "alice: 2 open orders"}
    [ctx] = seen
    assert ctx.deps == Shop("alice") and ctx.run_id == "run-1" and ctx.robot is robot
    assert isinstance(ctx.usage, RunUsage)
    assert (ctx.usage.input_tokens, ctx.usage.output_tokens) == (30, 7)  # the run's usage, kept up to date
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.deps = Shop("mallory")  # type: ignore[misc]


async def test_an_async_tool_and_a_class_tool_get_the_context_in_arun() -> None:
    llm = FakeLLM([tool_call("my_total"), tool_call("refund", order=7), "ok"])
    robot = build(name="shopper", llm=llm, local_tools=[my_total, Refund])
    result = await robot.arun("refund 7", deps=Shop("bob"))
    assert [call.content for call in result.tool_calls] == [{"data": "bob spent 40"}, {"data": "refunded 7 for bob"}]
    assert [ctx.deps for ctx in seen] == [Shop("bob"), Shop("bob")]
    assert seen[0].run_id == seen[1].run_id and len(seen[0].run_id) == 32  # one random id for the run


def test_the_schema_the_model_sees_has_no_context_parameter() -> None:
    llm = FakeLLM(["hi"])
    build(llm=llm, local_tools=[my_orders, my_total, Refund]).run("hello", deps=Shop("alice"))
    functions = {schema["function"]["name"]: schema["function"] for schema in llm.requests[0].tools}
    assert functions["my_orders"]["parameters"] == {
        "type": "object", "properties": {"status": {"type": "string", "description": "The orders' status."}},
        "required": ["status"],
    }
    assert functions["my_total"]["parameters"] == {"type": "object", "properties": {}}
    assert list(functions["refund"]["parameters"]["properties"]) == ["order"]


def test_stream_and_astream_pass_deps_and_no_deps_gives_none() -> None:
    robot = build(llm=FakeLLM([tool_call("my_orders", status="a"), "x", tool_call("my_orders", status="b"), "y",
                               tool_call("my_orders", status="c"), "z"]), local_tools=[my_orders])
    events = list(robot.stream("a", deps=Shop("carol"), run_id="streamed"))
    assert {event.run_id for event in events} == {"streamed"}

    async def consume() -> None:
        async for _ in robot.astream("b", deps=Shop("dave")):
            pass

    robotlab.runtime.run_sync(consume())
    robot.run("c")
    assert [ctx.deps for ctx in seen] == [Shop("carol"), Shop("dave"), None]
    assert seen[0].run_id == "streamed"


def test_a_tool_without_the_annotation_is_unchanged() -> None:
    llm = FakeLLM([tool_call("plain", status="x"), "ok"])
    result = build(llm=llm, local_tools=[plain]).run("go", deps=Shop("alice"))
    assert result.tool_calls[0].content == {"data": "plain x"}
    assert plain._context_parameter is None
    assert plain("y") == "plain y" and plain.call({"status": "z"}) == "plain z"


def test_outside_a_run_the_tool_says_it_needs_a_context_or_takes_one_given() -> None:
    assert my_orders.call({"status": "open"}) == (
        "Error (my_orders): this tool takes a RunContext: call it in a robot's run, or pass run_context= to "
        "acall()/call()"
    )
    robot = build(llm=FakeLLM())
    context = RunContext(deps=Shop("erin"), run_id="r", robot=robot, usage=RunUsage())
    assert my_orders.call({"status": "open"}, run_context=context) == "erin: 2 open orders"
    assert seen == [context]


def test_a_context_parameter_that_is_not_first_is_refused_at_definition() -> None:
    def late(status: str, ctx: RunContext[Shop]) -> str:
        return status

    with pytest.raises(TypeError, match=r"Tool 'late': the RunContext parameter 'ctx' of .*late must be its first"):
        tool(late)

    def keyword_only(*, ctx: RunContext[Shop], status: str) -> str:
        return status

    with pytest.raises(TypeError, match="must be its first parameter"):
        tool(keyword_only)

    with pytest.raises(TypeError, match="Tool 'wrong': the RunContext parameter 'ctx'"):
        class Wrong(Tool):
            def execute(self, order: int, ctx: RunContext) -> str:
                return ""


def test_deps_reach_every_task_of_a_network() -> None:
    first = build(name="first_bot", llm=FakeLLM([tool_call("my_orders", status="new"), "one"]),
                  local_tools=[my_orders])
    second = build(name="second_bot", llm=FakeLLM([tool_call("my_total"), "two"]), local_tools=[my_total])
    network = create_network(name="shop")
    network.task("first", first, depends_on="none")
    network.task("second", second, depends_on=["first"])
    result = network.run("go", deps=Shop("frank"))
    assert result.value.reply == "two"
    assert [(ctx.robot.name, ctx.deps) for ctx in seen] == [("first_bot", Shop("frank")), ("second_bot", Shop("frank"))]


def test_a_delegated_robot_gets_the_delegating_runs_deps() -> None:
    helper = build(name="helper", llm=FakeLLM([tool_call("my_total"), "helped", tool_call("my_total"), "again"]),
                   local_tools=[my_total])

    @tool
    def ask_helper(ctx: RunContext[Shop]) -> str:
        """Ask the helper (a sync tool: delegates from a worker thread)."""
        return ctx.robot.delegate(to=helper, task="total?").reply

    @tool
    async def ask_helper_async(ctx: RunContext[Shop]) -> str:
        """Ask the helper, awaited."""
        return (await ctx.robot.adelegate(to=helper, task="total?", deps=Shop("override"))).reply

    boss = build(name="boss", llm=FakeLLM([tool_call("ask_helper"), tool_call("ask_helper_async"), "done"]),
                 local_tools=[ask_helper, ask_helper_async])
    result = boss.run("go", deps=Shop("grace"), run_id="boss-run")
    assert [call.content for call in result.tool_calls] == [{"data": "helped"}, {"data": "again"}]
    assert [(ctx.robot.name, ctx.deps) for ctx in seen] == [("helper", Shop("grace")), ("helper", Shop("override"))]
    assert all(ctx.run_id != "boss-run" for ctx in seen)  # the delegated run is a run of its own


def test_a_script_tool_subclass_takes_the_context_in_execute(tmp_path: Any) -> None:
    from robotlab.tools.script import ScriptTool

    script = tmp_path / "greet.sh"
    script.write_text('#!/bin/bash\n# Greet someone.\necho "hello $1"\n')
    script.chmod(0o755)

    class UserScript(ScriptTool):
        """Runs the script with the run's user as its first argument."""

        async def execute(self, ctx: RunContext[Shop], args: Any = None) -> Any:
            return await super().execute(f"{ctx.deps.user} {args or ''}".strip())

    greet = UserScript(script)
    llm = FakeLLM([tool_call("greet"), "ok"])
    result = build(llm=llm, local_tools=[greet]).run("greet me", deps=Shop("heidi"))
    assert result.tool_calls[0].content == {"data": "hello heidi\n"}
    assert llm.requests[0].tools[0]["function"]["parameters"]["properties"] == {
        "args": {"type": "string", "description": "Optional command-line arguments"}
    }


async def test_concurrent_runs_of_one_tool_each_see_their_own_context() -> None:
    import asyncio

    both_in_flight = asyncio.Barrier(2)

    @tool
    async def whoami(ctx: RunContext[Shop]) -> str:
        """Who the run is for, read before and after the other run's call has started."""
        before = ctx.deps.user
        await asyncio.wait_for(both_in_flight.wait(), timeout=10)
        return f"{before}/{robotlab.run_context.current_run_context().deps.user}"  # type: ignore[union-attr]

    robots = [build(name=f"r{n}", llm=FakeLLM([tool_call("whoami"), "ok"]), local_tools=[whoami]) for n in (1, 2)]
    results = await asyncio.gather(robots[0].arun("a", deps=Shop("ivan")), robots[1].arun("b", deps=Shop("judy")))
    assert [r.tool_calls[0].content for r in results] == [{"data": "ivan/ivan"}, {"data": "judy/judy"}]
    assert robotlab.run_context.current_run_context() is None  # nothing leaks out of a run
