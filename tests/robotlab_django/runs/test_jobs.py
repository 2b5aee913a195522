"""Robot jobs."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab.testing import FakeLLM, text
from robotlab_django.models import Status
from robotlab_django.registry import UnknownRobotError
from robotlab_django.runs.jobs import RobotJob, RobotNotSpecifiedError, robot_job

pytestmark = pytest.mark.django_db


def test_a_bound_job_runs_its_robot_on_a_thread() -> None:
    job = robot_job("echo", queue="ai")
    row = job.run("hello", thread="s1", llm=FakeLLM([text("hi")]))
    assert (row.robot_name, row.reply, row.thread.session_id, job.queue) == ("echo", "hi", "s1", "ai")
    assert "echo" in repr(job)


def test_the_generic_job_needs_a_robot_per_call() -> None:
    job = RobotJob()
    with pytest.raises(RobotNotSpecifiedError, match="No robot specified"):
        job.run("hello")
    with pytest.raises(UnknownRobotError):
        job.run("hello", robot="ghost")
    assert job.run("hello", robot="echo", llm=FakeLLM([text("ok")])).status == Status.COMPLETED


def test_enqueue_uses_the_executor(scripted_llm: Any) -> None:
    scripted_llm(text("queued answer"))
    row = RobotJob("echo").enqueue("hello", thread="s1")
    row.refresh_from_db()
    assert (row.status, row.reply) == (Status.COMPLETED, "queued answer")


def test_the_queue_defaults_to_the_setting(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "TASK_QUEUE": "robots"}
    assert RobotJob("echo").queue == "robots"
