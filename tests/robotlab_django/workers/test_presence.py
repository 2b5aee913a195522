"""A run no worker picks up: the chat page's poll says so after ``WORKER_WAIT_HINT`` seconds, and
``manage.py check --deploy`` says that no worker consumes the queue (asked over the real Redis broker)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import Celery
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from robotlab_django import checks
from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.workers.presence import queue_consumers
from tests.robotlab_django.chat.test_views import URLCONF
from tests.robotlab_django.settings import CELERY_BROKER_TRANSPORT_OPTIONS
from tests.robotlab_django.workers.test_warm_up import _redis_down, celery_worker, worker_env  # noqa: F401

pytestmark = pytest.mark.django_db

BROKER = "redis://127.0.0.1:6379/15"
#: This test run's broker options (tests/robotlab_django/settings.py): its key prefix, which its workers share.
RUN_TRANSPORT = CELERY_BROKER_TRANSPORT_OPTIONS


def _row(thread: Thread, number: int, status: str, waited: float) -> RobotResult:
    row = RobotResult.objects.create(thread=thread, sequence_number=number, robot_name="echo", status=status,
                                     input=f"message {number}")
    RobotResult.objects.filter(pk=row.pk).update(updated_at=timezone.now() - timedelta(seconds=waited))
    return row


def test_the_poll_says_when_no_worker_has_picked_a_run_up(settings: Any) -> None:
    settings.ROOT_URLCONF = URLCONF
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "TASK_QUEUE": "runs"}
    alice = get_user_model().objects.create_user("alice", password="pw")
    thread = Thread.objects.create(user=alice, robot_name="echo")
    _row(thread, 1, Status.QUEUED, 30)
    _row(thread, 2, Status.QUEUED, 1)
    _row(thread, 3, Status.RUNNING, 30)
    client = Client()
    client.force_login(alice)
    url = reverse("robotlab:results_json", kwargs={"pk": thread.pk})
    hints = [result["hint"] for result in client.get(url).json()["results"]]
    assert hints[0].startswith("No worker has picked this run up in 30 s") and "-Q runs" in hints[0]
    assert hints[1:] == ["", ""]  # queued only a second ago; running
    settings.ROBOTLAB = {**settings.ROBOTLAB, "WORKER_WAIT_HINT": 60}
    assert [result["hint"] for result in client.get(url).json()["results"]] == ["", "", ""]
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread", "WORKER_WAIT_HINT": 10}
    assert [result["hint"] for result in client.get(url).json()["results"]] == ["", "", ""]


@pytest.fixture
def broker_app() -> Iterator[Celery]:
    """A Celery app on the real Redis (database 15), current while the test runs."""
    reason = _redis_down()
    if reason:
        pytest.skip(reason)
    from celery import current_app

    previous = current_app._get_current_object()
    app = Celery("robotlab-presence", broker=BROKER, set_as_current=True)
    app.conf.broker_transport_options = RUN_TRANSPORT  # this run's names: no other run's worker answers
    try:
        yield app
    finally:
        previous.set_current()
        app.close()


def test_check_deploy_says_no_worker_consumes_the_queue(settings: Any, broker_app: Celery) -> None:
    queue = f"robotlab-nobody-{time.monotonic_ns()}"
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "TASK_QUEUE": queue}
    warnings = checks.check_workers()
    assert [warning.id for warning in warnings] == ["robotlab.W006"]
    assert repr(queue) in warnings[0].msg and f"-Q {queue}" in str(warnings[0].hint)
    with pytest.raises(SystemCheckError, match="robotlab.W006"):
        call_command("check", "--deploy", "--fail-level", "WARNING")
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread"}
    assert checks.check_workers() == []


def test_check_deploy_says_when_the_broker_does_not_answer(settings: Any) -> None:
    from celery import current_app

    previous = current_app._get_current_object()
    app = Celery("robotlab-no-broker", broker="redis://127.0.0.1:1/0", set_as_current=True)
    try:
        settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery"}
        warnings = checks.check_workers()
    finally:
        previous.set_current()
        app.close()
    assert [warning.id for warning in warnings] == ["robotlab.W006"]
    assert "broker did not answer" in warnings[0].msg


@pytest.mark.slow
def test_a_worker_on_the_queue_answers(celery_worker: str, settings: Any) -> None:  # noqa: F811
    app = Celery("robotlab-presence-worker", broker=BROKER, set_as_current=False)
    app.conf.broker_transport_options = RUN_TRANSPORT  # the worker's keys and control channel carry the run's prefix
    try:
        deadline = time.monotonic() + 60
        found: list[str] = []
        while not found:  # each try waits a second for the workers' answers: the worker is still starting
            assert time.monotonic() < deadline, "the worker never answered"
            found = queue_consumers(celery_worker, app=app)
        assert len(found) == 1 and queue_consumers(f"{celery_worker}-other", app=app) == []
    finally:
        app.close()
