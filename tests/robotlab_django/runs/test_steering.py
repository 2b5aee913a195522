"""Which messages a running reply takes in (``on_busy = "steer"``), and which robots' runs are steered at all."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from robotlab.attachments import Attachment
from robotlab.testing import FakeLLM
from robotlab_django import services
from robotlab_django.abstract_models import Status
from robotlab_django.models import RobotResult
from robotlab_django.runs import claims, steering

pytestmark = pytest.mark.django_db

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


def test_only_text_messages_to_the_same_robot_queued_after_the_reply_are_taken() -> None:
    before = services.start_run("t", "calculator", "an older message")  # queued before it: not said during it
    RobotResult.objects.filter(pk=before.pk).update(status=Status.COMPLETED)
    running = services.start_run("t", "calculator", "first")
    assert claims.claim(running)
    said = services.start_run("t", "calculator", "also this")
    with_file = services.start_run("t", "calculator", "and this picture",
                                   attachments=[Attachment(data=PNG, mime_type="image/png")])
    other_robot = services.start_run("t", "echo", "echo this")
    elsewhere = services.start_run("other thread", "calculator", "not here")
    taken = steering.absorb(running)
    assert [row.pk for row in taken] == [said.pk]
    rows = {row.pk: row for row in RobotResult.objects.all()}
    assert (rows[said.pk].status, rows[said.pk].stop_reason) == (Status.COMPLETED, steering.STEERED)
    assert all(rows[row.pk].status == Status.QUEUED for row in (with_file, other_robot, elsewhere))
    assert steering.absorb(running) == []  # taken once


def test_only_a_steer_robots_replies_are_steered(settings: Any) -> None:
    row = services.start_run("t", "calculator", "first")
    robot = services.build_robot("calculator", llm=FakeLLM([]))
    steering.attach(robot, row)
    assert not isinstance(robot.llm, steering.SteeringLLM)  # enqueue, the default
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {"calculator": {"on_busy": "steer"}}}
    steering.attach(robot, row)
    assert isinstance(robot.llm, steering.SteeringLLM)
