"""Transcript items and JSON export."""

from __future__ import annotations

import json

import pytest

from robotlab_django.models import RobotResult, Thread
from robotlab_django.runs.transcript import TranscriptItem, export_thread, export_threads, run_items


def test_run_items_follow_the_messages_and_name_tool_results() -> None:
    row = RobotResult(input="2+3?", messages=[
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": "Let me add.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
        {"role": "assistant", "content": [{"type": "text", "text": "It is 5."}]},
    ])
    assert run_items(row) == [
        TranscriptItem("user", "2+3?"),
        TranscriptItem("assistant", "Let me add."),
        TranscriptItem("tool_call", '{\n  "a": 2,\n  "b": 3\n}', name="add", call_id="c1"),
        TranscriptItem("tool_result", "5", name="add", call_id="c1"),
        TranscriptItem("assistant", "It is 5."),
    ]
    assert [item.step for item in run_items(row)] == [0, 1, 1, 1, 2]  # the model call each line came from


def test_a_run_without_messages_shows_its_input() -> None:
    assert run_items(RobotResult(input="queued question")) == [TranscriptItem("user", "queued question")]
    assert run_items(RobotResult()) == []


def test_invalid_tool_arguments_are_shown_as_given() -> None:
    row = RobotResult(messages=[{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "function": {"name": "add", "arguments": "{not json"}}]}])
    assert run_items(row)[0].text == "{not json"


@pytest.mark.django_db
def test_export_holds_the_thread_its_totals_and_every_run() -> None:
    thread = Thread.objects.create(session_id="s1", state_data={"k": 1})
    RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="echo", input="<b>", reply="hi",
                               input_tokens=3, output_tokens=4, cost="0.25")
    data = export_thread(thread)
    assert data["session_id"] == "s1" and data["state_data"] == {"k": 1} and data["user"] is None
    assert data["totals"] == {"runs": 1, "input_tokens": 3, "output_tokens": 4, "cost": "0.25000000"}
    assert data["results"][0]["reply"] == "hi" and data["results"][0]["cost"] == "0.25000000"
    text = export_threads([thread])
    assert "<b>" not in text and json.loads(text)["threads"][0]["results"][0]["input"] == "<b>"
