"""The turn state machine of a network (robotlab.network.turn): readiness, routing and skips, halts, failures,
its JSON round trip, and a turn run task by task (the state stored between tasks) matching ``Network.arun``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from robotlab.errors import ConfigurationError
from robotlab.network import Network, TurnState, create_network
from robotlab.network.runner import LocalTurn
from robotlab.result import RobotResult
from robotlab.robot import Robot, build
from robotlab.streaming import Event
from robotlab.task import FlowResult
from robotlab.testing.fake import FakeLLM, tool_call
from robotlab.tools import Tool

PARAMS = {"message": "hi"}


def stored(state: TurnState) -> TurnState:
    """``state`` after a trip through JSON, as a worker would load it from a database row."""
    return TurnState.from_dict(json.loads(json.dumps(state.to_dict())))


def flow(value: Any, *activate: str) -> FlowResult:
    return FlowResult(value, context={"run_params": PARAMS, f"{value}_bot": value}).activate(*activate)


async def test_tasks_become_ready_when_their_dependencies_complete_and_a_join_gets_their_results() -> None:
    state = TurnState("n", {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]})
    assert state.ready() == ["a"] and state.ready() == ["a"]  # asking twice changes nothing
    state.start("a")
    assert state.ready() == [] and state.running == ["a"] and not state.is_done
    state.complete("a", flow("A"))
    assert state.ready() == ["b", "c"]
    state.start("b")
    state.start("c")
    state.complete("c", flow("C"))
    assert state.ready() == []  # d waits for b
    state.complete("b", flow("B"))
    assert state.ready() == ["d"]
    state.start("d")
    given = state.input("d", PARAMS)
    assert given.value == "C"  # the last dependency's value, in declaration order
    assert list(given.context.items()) == [("run_params", PARAMS), ("B_bot", "B"), ("C_bot", "C")]
    assert state.input("b", PARAMS).value == "A" and state.input("a", PARAMS).value is PARAMS
    state.complete("d", flow("D"))
    assert await state.advance(None, PARAMS) == [] and state.is_done and state.skipped == []
    final = state.final(PARAMS)
    assert final.value == "D" and list(state.results) == ["a", "c", "b", "d"]


async def test_only_activated_optional_tasks_run_and_the_rest_and_their_dependents_are_skipped() -> None:
    state = TurnState("support", {"classify": [], "billing": None, "tech": None, "after_tech": ["tech"],
                                  "summary": ["billing", "tech"]})
    assert await state.advance(None, PARAMS) == ["classify"]
    state.complete("classify", flow("classify", "billing"))
    assert await state.advance(None, PARAMS) == ["billing"]
    assert state.input("billing", PARAMS).value == "classify"  # the activator's value
    state.complete("billing", flow("billing"))
    assert await state.advance(None, PARAMS) == ["summary"]  # tech was skipped, so summary needs only billing
    assert state.skipped == ["tech", "after_tech"]
    state.complete("summary", flow("summary"))
    assert await state.advance(None, PARAMS) == [] and state.is_done
    final = state.final(PARAMS)
    assert final.value == "summary" and final.activated_steps == ["billing"]
    assert state.status == {"classify": "completed", "billing": "completed", "tech": "skipped",
                            "after_tech": "skipped", "summary": "completed"}


async def test_the_router_is_asked_when_idle_and_its_tasks_see_the_run_parameters() -> None:
    seen: list[FlowResult] = []

    def router(result: FlowResult) -> str | None:
        seen.append(result)
        return "tech" if "classify_bot" in result.context and "tech_bot" not in result.context else None

    state = TurnState("support", {"classify": [], "tech": None, "billing": None})
    assert await state.advance(router, PARAMS) == ["classify"]
    assert seen == []  # not asked while something was ready
    state.complete("classify", flow("classify"))
    assert await state.advance(router, PARAMS) == ["tech"]
    assert state.input("tech", PARAMS).value is PARAMS and "classify_bot" in state.input("tech", PARAMS).context
    state.complete("tech", flow("tech"))
    assert await state.advance(router, PARAMS) == [] and state.is_done
    assert len(seen) == 2 and state.skipped == ["billing"]


async def test_routing_errors_name_the_network_and_the_task() -> None:
    state = TurnState("support", {"classify": [], "billing": None})
    await state.advance(None, PARAMS)
    with pytest.raises(ConfigurationError, match=r"Task 'classify' activated unknown task 'refunds' in network "
                                                 r"'support' \(tasks: classify, billing\)"):
        state.complete("classify", flow("classify", "refunds"))
    routed = TurnState("r", {"only": []})
    assert await routed.advance(lambda result: None, PARAMS) == ["only"]
    routed.complete("only", flow("only"))
    with pytest.raises(ConfigurationError, match="The router activated unknown task 'nope' in network 'r'"):
        await routed.advance(lambda result: ["nope"], PARAMS)
    with pytest.raises(TypeError, match="The router of network 'r' must return a task name, a list or None"):
        TurnState("r", {"only": []}).route(42)


async def test_a_halt_stops_what_has_not_started_and_a_failure_ends_the_turn() -> None:
    state = TurnState("n", {"gate": [], "side": [], "later": ["gate"]})
    assert await state.advance(None, PARAMS) == ["gate", "side"]
    state.complete("gate", flow("gate").halt())
    assert await state.advance(None, PARAMS) == []  # side still runs; later never starts
    state.complete("side", flow("side"))
    assert await state.advance(None, PARAMS) == [] and state.is_done
    final = state.final(PARAMS)
    assert not final.is_continue and final.value == "gate" and state.status["later"] == "pending"

    failing = TurnState("n", {"a": [], "b": ["a"]})
    await failing.advance(None, PARAMS)
    failing.fail("a", RuntimeError("boom"))
    assert failing.is_done and failing.failed == "a" and failing.errors == {"a": "RuntimeError: boom"}
    assert await failing.advance(None, PARAMS) == []


def test_wrong_moves_are_clear_errors() -> None:
    state = TurnState("n", {"a": [], "b": ["a"]})
    with pytest.raises(ValueError, match="Task 'b' of network 'n' is not ready to start"):
        state.start("b")
    with pytest.raises(ValueError, match="Task 'a' of network 'n' is not running"):
        state.complete("a", flow("a"))
    with pytest.raises(KeyError, match="Task 'b' of network 'n' has not been started"):
        state.input("b", PARAMS)
    with pytest.raises(ValueError, match="Not a stored network turn state"):
        TurnState.from_dict({"network": "n"})


async def test_the_state_survives_a_json_round_trip_at_every_step() -> None:
    result = RobotResult(robot_name="a_bot", output=[{"role": "assistant", "content": "from a"}], input_tokens=3,
                         model="m")
    result.duration = 0.5
    first = FlowResult(None, context={"run_params": PARAMS}).with_context("a_bot", result).continue_(result)
    state = TurnState("n", {"a": [], "opt": None, "b": ["a"]})
    await state.advance(None, PARAMS)
    state = stored(state)
    state.complete("a", first.with_error("a", "warned").activate("opt"))
    again = stored(state)
    assert again == state and again.to_dict() == state.to_dict()
    loaded = again.results["a"]
    assert loaded.value is loaded.context["a_bot"]  # stored once, one object again
    assert loaded.value.reply == "from a" and loaded.value.duration == 0.5 and loaded.value.input_tokens == 3
    assert loaded.errors == {"a": ["warned"]} and loaded.activated_steps == ["opt"]
    assert await again.advance(None, PARAMS) == ["opt", "b"]
    assert again.input("b", PARAMS).value.reply == "from a"
    assert again != state

    unstorable = TurnState("n", {"a": []})
    await unstorable.advance(None, PARAMS)
    unstorable.complete("a", FlowResult(object()))
    with pytest.raises(TypeError, match="cannot store task 'a'.value: object"):
        unstorable.to_dict()


# -- a turn run one task at a time equals Network.arun ---------------------------------------------------
class Remember(Tool):
    description = "Remember the category."

    def execute(self, category: str) -> str:
        assert self.robot is not None
        self.robot.run_memory.set("category", category)
        return "ok"


class Classifier(Robot):
    async def call(self, result: FlowResult) -> FlowResult:
        routed = await super().call(result)
        return routed.activate(str(routed.value.reply).strip())


def fan_network() -> Network:
    """1 -> 3 -> 1, plus an optional branch the first task activates and one nobody does."""
    network = create_network(name="fan")
    network.task("split", Classifier(name="splitter", llm=FakeLLM([tool_call("remember", category="x"), "extra"]),
                                     local_tools=[Remember]))
    for name in ("one", "two", "three"):
        network.task(name, build(name=f"{name}_bot", llm=FakeLLM([f"part {name}"])), depends_on="split")
    network.task("extra", build(name="extra_bot", llm=FakeLLM(["more"])), depends_on="optional")
    network.task("unused", build(name="unused_bot", llm=FakeLLM(["never"])), depends_on="optional")
    network.task("join", build(name="joiner", llm=FakeLLM(["joined"])), depends_on=["one", "two", "three"])
    return network


def routed_network() -> Network:
    def router(result: FlowResult) -> str | None:
        return "answer" if "answer_bot" not in result.context else None

    network = create_network(name="routed", router=router)
    network.task("look", build(name="looker", llm=FakeLLM(["seen"])))
    network.task("answer", build(name="answer_bot", llm=FakeLLM(["answered"])), depends_on="optional")
    return network


async def task_by_task(network: Network, message: str, on_event: Callable[[Event], Any]) -> FlowResult:
    """The turn driven as a distributed executor would: the state stored and loaded around every task."""
    state = network.turn_state()
    params = network.run_params(message)
    while True:
        state = stored(state)
        names = await state.advance(network.router, params)
        if state.is_done:
            break
        assert names, "nothing runs between tasks here, so something must be ready"
        for name in names:
            result = await network.arun_task(name, stored(state), message, on_event=on_event, run_id="t")
            state.complete(name, result)
    assert state.is_done and not state.running
    return stored(state).final(params)


def per_task(events: list[Event]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    grouped: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for event in events:
        if "task" in event.data:
            data = {k: v for k, v in event.data.items() if k not in ("id", "duration", "ts")}
            grouped.setdefault(event.data["task"], []).append((event.kind, data))
    return grouped


@pytest.mark.parametrize("factory", [fan_network, routed_network])
async def test_a_turn_run_task_by_task_from_stored_state_equals_arun(factory: Callable[[], Network]) -> None:
    whole_events: list[Event] = []
    whole_network = factory()
    whole = await whole_network.arun("go", on_event=whole_events.append, run_id="t")
    step_events: list[Event] = []
    step_network = factory()
    stepped = await task_by_task(step_network, "go", step_events.append)
    assert stepped.value.reply == whole.value.reply and stepped.is_continue == whole.is_continue
    assert sorted(stepped.context) == sorted(whole.context)  # in finishing order, which concurrency may change
    assert stepped.replies == whole.replies and stepped.activated_steps == whole.activated_steps
    assert stepped.errors == whole.errors
    assert per_task(step_events) == per_task(whole_events)  # same step.* and robot events, in order, per task
    assert {e.kind for e in step_events} >= {"step.started", "text.delta", "step.completed"}
    assert step_network.memory.get("category") == whole_network.memory.get("category")
    for robot_task in whole_network.tasks:  # every robot had the same conversation (tool call ids aside)
        def talk(network: Network, task: str = robot_task) -> list[tuple[str, Any]]:
            return [(m["role"], m.get("content")) for m in network.robots[task].messages]

        assert talk(step_network) == talk(whole_network)


async def test_the_unactivated_branch_is_skipped_in_a_whole_run_too() -> None:
    network = fan_network()
    state = network.turn_state()
    params = network.run_params("go")
    result = await LocalTurn(network, state, params).execute()
    assert state.skipped == ["unused"] and "unused_bot" not in result.context
    assert result.activated_steps == ["extra"] and result.value.reply == "joined"
    assert network.memory.get("category") == "x"


async def test_arun_task_runs_only_a_running_task() -> None:
    network = fan_network()
    state = network.turn_state()
    with pytest.raises(ValueError, match="Task 'join' of network 'fan' is not running in this turn"):
        await network.arun_task("join", state, "go")
