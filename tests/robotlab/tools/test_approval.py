"""Approvals (issue 27, item 4): an ``approve=True`` tool asks its robot's approver before each call runs."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import pytest

import robotlab
from robotlab import ApprovalRequest, Decision, TerminalApprover, Tool, ToolError, tool
from robotlab.testing import FakeLLM, tool_call
from robotlab.tools.approval import APPROVAL, ParkingApprover, approval_request, approves
from robotlab.tools.parking import RunParked


def refunds() -> tuple[Tool, list[str]]:
    """A refund tool that needs approval, and the orders it refunded."""
    done: list[str] = []

    @tool(side_effect=True, approve=True)
    def refund(order: str, amount: int = 0) -> str:
        """Refund an order."""
        done.append(order)
        return f"refunded {order}"

    return refund, done


def robot_with(tools: list[Tool], approver: Any, *calls: Any) -> tuple[robotlab.Robot, FakeLLM]:
    llm = FakeLLM([*calls, "done"])
    built = robotlab.build(name="clerk", llm=llm, local_tools=tools, doom_loop_threshold=100)
    built.approver = approver
    return built, llm


def read_back(llm: FakeLLM) -> list[str]:
    """What the model read after each of its requests but the first: the tool results."""
    return [str(request.messages[-1]["content"]) for request in llm.requests[1:]]


def test_an_approved_call_runs_and_a_denied_one_does_not() -> None:
    refund, done = refunds()
    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision(approved=request.arguments["order"] == "A-1", by="ada")

    robot, llm = robot_with([refund], approver, tool_call("refund", order="A-1"), tool_call("refund", order="B-2"))
    assert robot.run("refund both").reply == "done"
    assert done == ["A-1"]
    assert read_back(llm) == ["refunded A-1", "denied by ada"]
    assert [(request.tool, dict(request.arguments), request.robot) for request in asked] == [
        ("refund", {"order": "A-1"}, "clerk"), ("refund", {"order": "B-2"}, "clerk")]
    assert asked[0].choices == ("approve", "deny") and asked[0].question == 'Approve refund {"order": "A-1"}?'


def test_a_bool_answer_and_an_async_approver_and_one_with_aapprove() -> None:
    async def no(request: ApprovalRequest) -> bool:
        return False

    class Yes:
        async def aapprove(self, request: ApprovalRequest) -> bool:
            return True

    for approver, expected in ((lambda request: False, "denied"), (no, "denied"), (Yes(), "refunded A-1")):
        refund, _done = refunds()
        robot, llm = robot_with([refund], approver, tool_call("refund", order="A-1"))
        robot.run("refund")
        assert read_back(llm) == [expected]


def test_without_an_approver_the_tool_runs_and_tools_without_the_flag_never_ask() -> None:
    refund, done = refunds()

    @tool
    def lookup(order: str) -> str:
        """Look an order up."""
        return f"{order}: paid"

    robot, llm = robot_with([refund, lookup], None, tool_call("refund", order="A-1"))
    robot.run("refund")
    assert done == ["A-1"]
    asked: list[Any] = []
    robot, llm = robot_with([lookup], lambda request: asked.append(request) or False, tool_call("lookup", order="A"))
    robot.run("look")
    assert read_back(llm) == ["A: paid"] and asked == []


def update(**arguments: Any) -> Any:
    """The model's call of ``update`` (``id`` is also ``tool_call``'s own keyword)."""
    return tool_call("update", raw_arguments=json.dumps(arguments))


class Update(Tool):
    """Change a row's status."""

    approve = True
    rows: dict[int, str] = {1: "open"}

    async def approval_details(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments["id"] not in self.rows:
            raise ToolError(f"there is no row {arguments['id']}")
        return {"changes": [{"field": "status", "before": self.rows[arguments["id"]], "after": arguments["status"]}]}

    def execute(self, id: int, status: str) -> str:
        self.rows[id] = status
        return f"row {id} is {status}"


def test_the_approver_sees_the_tools_details_and_a_refusal_there_asks_nobody() -> None:
    asked: list[ApprovalRequest] = []
    robot, llm = robot_with([Update()], lambda request: asked.append(request) or True,
                            update(id=1, status="done"), update(id=9, status="done"), update(id="x"))
    robot.run("update")
    assert read_back(llm) == ["row 1 is done", "Error (update): there is no row 9",
                              "Error (update): invalid arguments: id: Input should be a valid integer, unable to "
                              "parse string as an integer; status: Field required"]
    [request] = asked  # neither the refused call nor the invalid one was put to a person
    assert request.details == {"changes": [{"field": "status", "before": "open", "after": "done"}]}
    assert request.question == 'Approve update {"id": 1, "status": "done"}?\nstatus: "open" -> "done"'


def test_the_terminal_approver_shows_the_call_and_reads_yes_or_no() -> None:
    for line, expected in (("y\n", "refunded A-1"), ("yes\n", "refunded A-1"), ("\n", "denied by the user"),
                           ("", "denied by the user")):
        refund, _done = refunds()
        out = io.StringIO()
        robot, llm = robot_with([refund], TerminalApprover(io.StringIO(line), out), tool_call("refund", order="A-1"))
        robot.run("refund")
        assert read_back(llm) == [expected]
        assert out.getvalue() == '\n[clerk] Approve refund {"order": "A-1"}?\nApprove? [y/N] '


def test_a_parking_approver_parks_the_run_with_the_request_and_a_stored_decision_answers_it() -> None:
    refund, done = refunds()
    robot, _llm = robot_with([refund], ParkingApprover(), tool_call("refund", order="A-1", amount=5))
    events: list[Any] = []
    with pytest.raises(RunParked) as parked:
        robot.run("refund", on_event=events.append)
    request = parked.value.request
    assert isinstance(request, ApprovalRequest) and done == []
    payload = request.to_dict()
    assert payload["type"] == APPROVAL and payload["tool"] == "refund"
    assert payload["arguments"] == {"order": "A-1", "amount": 5} and payload["choices"] == ["approve", "deny"]
    assert [event.data["request_id"] for event in events if event.kind == "hitl.requested"] == [request.id]

    decisions = [{"type": APPROVAL, "tool": "refund", "arguments": {"amount": 5, "order": "A-1"}, "answer": "deny",
                  "by": "bob"},
                 {"question": "Which plan?", "answer": "pro"},  # a question's answer: not a decision
                 {"type": APPROVAL, "tool": "refund", "arguments": {"order": "A-1", "amount": 5}, "answer": "approve",
                  "by": "ada"}]
    robot, llm = robot_with([refund], ParkingApprover(decisions), tool_call("refund", order="A-1", amount=5),
                            tool_call("refund", order="A-1", amount=5))
    robot.run("refund twice")
    assert read_back(llm) == ["denied by bob", "refunded A-1"]  # each decision answers one call, in order
    assert done == ["A-1"]
    robot, _llm = robot_with([refund], ParkingApprover(decisions), tool_call("refund", order="A-1", amount=6))
    with pytest.raises(RunParked):  # other arguments: a call nobody decided
        robot.run("refund")


def test_answers_to_an_approval_read_as_approve_deny_or_neither() -> None:
    assert [approves(text) for text in ("approve", " Yes ", "1", "deny", "NO", "2", "maybe", "")] == [
        True, True, True, False, False, False, None, None]


def test_a_wrong_answer_of_an_approver_is_a_type_error_not_an_approval() -> None:
    refund, done = refunds()
    robot, llm = robot_with([refund], lambda request: "sure", tool_call("refund", order="A-1"))
    robot.run("refund")
    assert read_back(llm) == ["Error (refund): an approver returns a Decision or a bool, not str"] and done == []


def test_approval_request_words_changes_and_carries_what_a_host_stores() -> None:
    request = approval_request("update_note", {"id": 3, "status": "done"},
                               {"changes": [{"field": "status", "before": "open", "after": "done"},
                                            {"field": "due", "before": None, "after": "2026-12-24"}]})
    assert request.question == ('Approve update_note {"id": 3, "status": "done"}?\nstatus: "open" -> "done"\n'
                                'due: null -> "2026-12-24"')
    assert asyncio.run(ParkingApprover([{**request.to_dict(), "answer": "approve", "by": "ada"}]).aapprove(
        request)) == Decision(approved=True, by="ada")
