"""A running task stops before a model call once its turn ended (robotlab_django.networks.stops.TurnGuard)."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab.llm import LLMRequest
from robotlab.testing import FakeLLM, text
from robotlab_django.models import RobotResult, Status
from robotlab_django.networks.stops import TurnEndedError, TurnGuard
from robotlab_django.runs.records import append_result, start_run
from robotlab_django.runs.sync_bridge import call_sync

pytestmark = pytest.mark.django_db


def test_a_guard_told_the_turn_was_just_read_sends_the_first_call_and_checks_the_next(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "CANCEL_POLL_INTERVAL": 0.01}
    turn = start_run("s1", "helpdesk", "Hello")
    task = append_result(turn.thread, robot_name="classifier", task_name="classifier", parent_id=turn.pk,
                         status=Status.RUNNING)
    RobotResult.objects.filter(pk=turn.pk).update(status=Status.FAILED)  # the turn ended after the job read it
    llm = FakeLLM([text("first"), text("second")])
    guard = TurnGuard(llm, task, checked=True)
    request = LLMRequest(model="fake", messages=[{"role": "user", "content": "hi"}])
    assert call_sync(guard.complete, request).content == "first"  # its job read the turn running a moment ago
    with pytest.raises(TurnEndedError):
        call_sync(guard.complete, request)  # the next call reads it: the task stops
    assert len(llm.requests) == 1
    assert TurnGuard(FakeLLM([text("x")]), task).checked is False  # by default every call reads it
