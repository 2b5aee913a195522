"""The translator on stored events made by hand: attempts that repeat, tool calls, side-by-side rows, the ends."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

from robotlab.streaming import ALL_EVENTS
from robotlab_django.agui.events import AGUI_EVENTS
from robotlab_django.agui.translate import Translator
from tests.robotlab_django.agui.client import checked, of_type, text_of

RUN = uuid.uuid4().hex


def _row(status: str = "completed", **fields: Any) -> Any:
    base = {"pk": 1, "run_id": RUN, "status": status, "reply": "", "question": {}, "error_type": "", "error": "",
            "error_kind": "", "input_tokens": 0, "output_tokens": 0, "model": ""}
    return SimpleNamespace(**{**base, **fields})


def _ev(kind: str, cursor: int, row: int = 1, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "run_id": RUN, "seq": cursor, "ts": 0.0, **data, "cursor": cursor, "result_id": row}


def _run(stored: list[dict[str, Any]], row: Any = None) -> list[dict[str, Any]]:
    """The whole AG-UI run of ``stored``, its start included, checked as the official client checks it."""
    translator = Translator(row or _row())
    events = [{"type": "RUN_STARTED", "threadId": "t", "runId": "r"}]
    for event in stored:
        events += translator.feed(event)
    return checked([(None, event) for event in events + translator.finish(row or _row(), "t", "r")])


def test_every_kind_is_bridged_or_dropped_with_a_reason() -> None:
    assert set(AGUI_EVENTS) == set(ALL_EVENTS)


def test_a_lost_workers_new_attempt_sends_only_what_it_adds() -> None:
    events = _run([_ev("run.started", 1), _ev("text.delta", 2, text="Hello "), _ev("text.delta", 3, text="wor"),
                   _ev("run.started", 4), _ev("text.delta", 5, text="Hello "), _ev("text.delta", 6, text="world.")])
    assert [event["delta"] for event in of_type(events, "TEXT_MESSAGE_CONTENT")] == ["Hello ", "wor", "ld."]
    assert len(of_type(events, "TEXT_MESSAGE_START")) == 1


def test_an_attempt_that_says_otherwise_starts_a_message_that_replaces() -> None:
    events = _run([_ev("run.started", 1), _ev("text.delta", 2, text="Hello"), _ev("run.started", 3),
                   _ev("text.delta", 4, text="Goodbye.")])
    first, second = of_type(events, "TEXT_MESSAGE_START")
    assert second["metadata"] == {"robotlab": {"replaces": True}} and "metadata" not in first
    assert [(e["messageId"], e["delta"]) for e in of_type(events, "TEXT_MESSAGE_CONTENT")] == [
        (first["messageId"], "Hello"), (second["messageId"], "Goodbye.")]


def test_a_repeated_tool_call_is_not_sent_again_and_a_reused_id_gets_its_own() -> None:
    call = {"id": "call_0", "name": "add", "arguments": {"a": 1}}
    events = _run([_ev("run.started", 1), _ev("tool_call.started", 2, **call),
                   _ev("tool_call.completed", 3, id="call_0", name="add", result="1"),
                   _ev("run.started", 4), _ev("tool_call.started", 5, **call),
                   _ev("tool_call.completed", 6, id="call_0", name="add", result="1"),
                   _ev("usage.updated", 7), _ev("tool_call.started", 8, **call),  # the model's next call, same id
                   _ev("tool_call.completed", 9, id="call_0", name="add", result="2")])
    assert [e["toolCallId"] for e in of_type(events, "TOOL_CALL_START")] == ["call_0", "call_0-8"]
    assert [(e["toolCallId"], e["content"]) for e in of_type(events, "TOOL_CALL_RESULT")] == [
        ("call_0", "1"), ("call_0-8", "2")]


def test_calls_join_their_responses_message_and_a_new_response_starts_another() -> None:
    events = _run([_ev("text.delta", 1, text="Let me look."), _ev("usage.updated", 2),
                   _ev("tool_call.started", 3, id="a", name="find"), _ev("tool_call.completed", 4, id="a", result=""),
                   _ev("tool_call.started", 5, id="b", name="find"), _ev("tool_call.completed", 6, id="b", result=""),
                   _ev("usage.updated", 7), _ev("tool_call.started", 8, id="c", name="find"),
                   _ev("tool_call.completed", 9, id="c", result=""), _ev("usage.updated", 10),
                   _ev("tool_call.started", 11, id="d", name="find")])
    assert [e.get("parentMessageId") for e in of_type(events, "TOOL_CALL_START")] == ["rl-1", "rl-1", None, None]


def _task(kind: str, cursor: int, row: int, task: str, **data: Any) -> dict[str, Any]:
    return _ev(kind, cursor, row, network="n", task=task, robot=f"{task}_robot", **data)


def test_the_rows_of_side_by_side_tasks_give_the_same_events_in_any_order() -> None:
    a = [_task("step.started", 10, 2, "a"), _task("text.delta", 11, 2, "a", text="A1"),
         _task("text.delta", 14, 2, "a", text="A2"), _task("step.completed", 15, 2, "a", reply="A1A2")]
    b = [_task("step.started", 12, 3, "b"), _task("text.delta", 13, 3, "b", text="B1"),
         _task("step.completed", 16, 3, "b", reply="B1")]

    def per_task(order: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for event in _run(order):
            found.setdefault(event.get("subagentRunId") or "", []).append(event)
        return found

    interleaved = per_task([a[0], b[0], a[1], b[1], a[2], b[2], a[3]])
    assert interleaved == per_task(a + b) == per_task(b + a)
    assert text_of(interleaved[f"{uuid.UUID(RUN)}/a"]) == "A1A2"
    assert [e["type"] for e in interleaved[f"{uuid.UUID(RUN)}/b"]][:2] == ["SUBAGENT_STARTED", "STEP_STARTED"]
    cancelled = _row("cancelled")  # both tasks still open: the end closes them in one order, whatever the reading
    ends = {tuple(map(str, _run(order, cancelled)[-7:])) for order in ([a[0], b[0], a[1], b[1]], a[:2] + b[:2],
                                                                        b[:2] + a[:2])}
    assert len(ends) == 1


def test_a_failed_run_ends_its_open_task_and_errors_with_the_public_message() -> None:
    row = _row("failed", error_type="ValueError", error="bad input", input_tokens=3, output_tokens=1)
    events = _run([_task("step.started", 1, 1, "a"), _task("text.delta", 2, 1, "a", text="Hal")], row)
    assert [e["type"] for e in events[-4:]] == ["TEXT_MESSAGE_END", "STEP_FINISHED", "SUBAGENT_ERROR", "RUN_ERROR"]
    assert events[-1]["code"] == "ValueError" and events[-1]["message"] == "bad input"
    assert events[-1]["usage"] == [{"inputTokens": 3, "outputTokens": 1, "totalTokens": 4}]


def test_a_parked_task_is_suspended_with_the_interrupt_it_raised() -> None:
    question = {"request_id": "q1", "question": "Which?", "choices": [], "default": None}
    row = _row("awaiting", question=question)
    events = _run([_task("step.started", 1, 1, "a"), _task("tool_call.started", 2, 1, "a", id="c1", name="ask"),
                   _task("hitl.requested", 3, 1, "a", **question)], row)
    finished, = of_type(events, "SUBAGENT_FINISHED")
    assert finished["outcome"] == {"type": "suspended", "interruptIds": ["q1"]}
    parked, = events[-1]["outcome"]["interrupts"]
    assert (parked["id"], parked["toolCallId"], parked["subagentRunId"]) == ("q1", "c1", finished["subagentRunId"])
