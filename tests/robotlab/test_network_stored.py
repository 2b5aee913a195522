"""A turn's results as stored (robotlab.network.stored): loaded when asked for, written as read when untouched,
each context entry stored once, and the states of the earlier format still read."""

from __future__ import annotations

import json
from typing import Any

from robotlab.network import TurnState
from robotlab.network.codec import load_flow
from robotlab.network.stored import Results
from robotlab.result import RobotResult
from robotlab.task import FlowResult

PARAMS = {"message": "hi"}


def result(name: str, reply: str) -> RobotResult:
    return RobotResult(robot_name=name, output=[{"type": "text", "role": "assistant", "content": reply}])


def fan_out() -> TurnState:
    """plan -> a, b -> join, run to the end in one state, each task's context holding what fed it (as in a turn)."""
    state = TurnState("n", {"plan": [], "a": ["plan"], "b": ["plan"], "join": ["a", "b"]})
    for names in (["plan"], ["a", "b"], ["join"]):
        for name in names:
            state.start(name) if name in state.ready() else None
        for name in names:
            given = state.input(name, PARAMS)
            own = result(f"{name}_bot", f"{name} done")
            state.complete(name, given.with_context(f"{name}_bot", own).continue_(own))
    return state


def reread(data: dict[str, Any]) -> TurnState:
    return TurnState.from_dict(json.loads(json.dumps(data)))


def test_a_context_entry_an_earlier_result_stores_is_stored_as_a_reference_and_read_back_whole() -> None:
    state = fan_out()
    data = state.to_dict()
    assert data["format"] == 2
    contexts = {name: dict(flow["context"]) for name, flow in data["results"]}
    assert contexts["a"]["plan_bot"] == {"$same_as": "plan"} and contexts["b"]["plan_bot"] == {"$same_as": "plan"}
    assert contexts["join"]["a_bot"] == {"$same_as": "a"} and "$same_as" not in contexts["join"]["join_bot"]
    again = reread(data)
    for name in ("plan", "a", "b", "join"):
        assert again.results[name].context.keys() == state.results[name].context.keys() - {"run_params"}
        assert again.results[name].context[f"{name}_bot"].reply == f"{name} done"
    assert again.results["join"].context["plan_bot"].reply == "plan done"
    assert again.final(PARAMS).value.reply == "join done" and again == state


def test_results_are_loaded_when_asked_for_and_written_as_read_when_untouched() -> None:
    data = json.loads(json.dumps(fan_out().to_dict()))
    stored = dict(data["results"])
    state = TurnState.from_dict(data)
    assert isinstance(state.results, Results)
    assert all(type(value).__name__ == "_Stored" for value in state.results._items.values())  # nothing loaded
    again = state.to_dict()
    assert all(flow is stored[name] for name, flow in again["results"])  # the very dicts read
    assert state.results["a"].context["a_bot"].reply == "a done"  # loaded now, the others still not
    assert [type(value).__name__ for value in state.results._items.values()] == [
        "_Stored", "FlowResult", "_Stored", "_Stored"]
    assert reread(state.to_dict()) == reread(data)


def test_a_result_referring_to_one_loaded_since_is_dumped_again() -> None:
    data = json.loads(json.dumps(fan_out().to_dict()))
    state = TurnState.from_dict(data)
    plan = state.results["plan"]
    plan.context["plan_bot"] = result("plan_bot", "changed")  # someone changed the loaded plan's result
    dumped = dict(state.to_dict()["results"])
    assert dumped["a"] is not dict(data["results"])["a"]  # it named the plan's entry: written anew
    assert load_flow(dumped["plan"]).context["plan_bot"].reply == "changed"


def test_a_state_of_the_first_format_is_read() -> None:
    data = json.loads(json.dumps(fan_out().to_dict()))
    full = {name: dict(flow["context"]) for name, flow in data["results"]}
    old = {**data, "format": 1, "results": [[name, {**flow, "context": [
        [key, full[value["$same_as"]][key] if isinstance(value, dict) and "$same_as" in value else value]
        for key, value in flow["context"]]}] for name, flow in data["results"]]}
    assert "$same_as" not in json.dumps(old)
    assert TurnState.from_dict(old).final(PARAMS).value.reply == "join done"


def test_a_plain_mapping_of_results_is_stored_too() -> None:
    state = TurnState("n", {"a": []})
    state.ready()
    state.start("a")
    state.results = {"a": FlowResult("x", context={"a_bot": result("a_bot", "x")})}
    state.status["a"] = "completed"
    assert reread(state.to_dict()).results["a"].context["a_bot"].reply == "x"
