"""Loading a thread's history: order, filters, one query."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.runs.history import load_history

pytestmark = pytest.mark.django_db


def _run(thread: Thread, number: int, status: Any = Status.COMPLETED, robot: str = "echo") -> RobotResult:
    messages = [{"role": "user", "content": f"q{number}"}, {"role": "assistant", "content": f"a{number}"}]
    return RobotResult.objects.create(thread=thread, sequence_number=number, robot_name=robot, status=status,
                                      messages=messages)


def test_history_is_the_completed_runs_in_sequence_order(django_assert_num_queries: Any) -> None:
    thread = Thread.objects.create()
    for number in (3, 1, 2):
        _run(thread, number)
    _run(thread, 4, status=Status.FAILED)
    _run(thread, 5, status=Status.RUNNING)
    with django_assert_num_queries(1):
        history = load_history(thread)
    assert [message["content"] for message in history] == ["q1", "a1", "q2", "a2", "q3", "a3"]
    assert load_history(thread.pk) == history


def test_history_before_a_run_and_for_one_robot() -> None:
    thread = Thread.objects.create()
    _run(thread, 1)
    _run(thread, 2, robot="calculator")
    _run(thread, 3)
    assert [m["content"] for m in load_history(thread, before=3)] == ["q1", "a1", "q2", "a2"]
    assert [m["content"] for m in load_history(thread, robot_name="calculator")] == ["q2", "a2"]
    assert load_history(Thread.objects.create()) == []
