"""The models: Rails columns and defaults, constraints, conversions."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, transaction

from robotlab_django.models import RobotResult, RunEvent, Status, Thread

pytestmark = pytest.mark.django_db


def test_thread_defaults_match_rails() -> None:
    thread = Thread.find_or_create_by_session_id("s1")
    assert (thread.input_metadata, thread.state_data, thread.message_count(), thread.last_result()) == (
        {}, {}, 0, None)
    assert Thread.find_or_create_by_session_id("s1") == thread
    assert str(thread) == "s1"


def test_a_new_thread_gets_a_uuid_session_id() -> None:
    thread = Thread.objects.create()
    assert uuid.UUID(thread.session_id)


def test_sequence_numbers_are_unique_per_thread() -> None:
    one, two = Thread.objects.create(), Thread.objects.create()
    RobotResult.objects.create(thread=one, sequence_number=1, robot_name="echo")
    RobotResult.objects.create(thread=two, sequence_number=1, robot_name="echo")
    with pytest.raises(IntegrityError), transaction.atomic():
        RobotResult.objects.create(thread=one, sequence_number=1, robot_name="echo")


def test_last_result_and_counts() -> None:
    thread = Thread.objects.create()
    for number in (1, 2, 3):
        RobotResult.objects.create(thread=thread, sequence_number=number, robot_name="echo",
                                   status=Status.COMPLETED if number < 3 else Status.FAILED)
    assert thread.last_result().sequence_number == 3
    assert thread.message_count() == 3
    assert RobotResult.objects.completed().count() == 2
    assert RobotResult.objects.failed().count() == 1
    assert RobotResult.objects.unfinished().count() == 0


def test_to_robot_result_round_trips_the_stored_run() -> None:
    thread = Thread.objects.create()
    output = [{"type": "text", "role": "assistant", "content": "3", "stop_reason": "stop"}]
    tools = [{"type": "tool_result", "role": "tool_result", "tool": {"type": "tool", "id": "c1", "name": "add",
                                                                      "input": {"a": 1}},
              "content": {"data": 3}, "stop_reason": "tool"}]
    row = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="calculator", output_data=output,
                                     tool_calls_data=tools, stop_reason="stop", input_tokens=10, output_tokens=2,
                                     cost=Decimal("0.0015"), model="fake", duration=0.5, delegated_by="boss")
    result = row.to_robot_result()
    assert (result.reply, result.robot_name, result.id, result.model) == ("3", "calculator", row.run_id, "fake")
    assert (result.input_tokens, result.output_tokens, result.cost) == (10, 2, 0.0015)
    assert (result.duration, result.delegated_by) == (0.5, "boss")
    assert result.tool_calls[0].tool.name == "add"
    assert row.output_messages()[0].content == "3"
    assert row.tool_call_messages()[0].tool.id == "c1"
    assert row.total_tokens == 12 and not row.is_finished


def test_deleting_a_thread_deletes_its_results_and_events() -> None:
    thread = Thread.objects.create()
    row = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="echo")
    RunEvent.objects.create(thread=thread, result=row, run_id=row.run_id, seq=1, kind="run.started", ts=1.0)
    thread.delete()
    assert (RobotResult.objects.count(), RunEvent.objects.count()) == (0, 0)


def test_run_events_are_unique_per_run_and_replay_as_dicts() -> None:
    thread = Thread.objects.create()
    event = RunEvent.objects.create(thread=thread, run_id="r1", seq=1, kind="text.delta", ts=2.5,
                                    data={"text": "hi"})
    assert event.to_dict() == {"kind": "text.delta", "run_id": "r1", "seq": 1, "ts": 2.5, "text": "hi"}
    with pytest.raises(IntegrityError), transaction.atomic():
        RunEvent.objects.create(thread=thread, run_id="r1", seq=1, kind="text.delta", ts=3.0)


def test_json_fields_store_values_json_cannot(django_user_model: Any) -> None:
    thread = Thread.objects.create(state_data={"tags": {"b", "a"}, "when": uuid.UUID(int=1), "obj": object()})
    thread.refresh_from_db()
    assert thread.state_data["tags"] == ["a", "b"]
    assert thread.state_data["when"] == str(uuid.UUID(int=1))
    assert thread.state_data["obj"].startswith("<object object")


def test_threads_for_a_user(django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user("owner")
    mine = Thread.objects.create(user=owner)
    Thread.objects.create()
    assert list(Thread.objects.for_user(owner)) == [mine]
    assert list(Thread.objects.for_user(None)) == []
