"""The Celery task and stuck-run recovery, called in process (a real worker: test_worker.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.core.management import call_command
from django.db import InterfaceError, OperationalError, connections, transaction
from django.utils import timezone

from robotlab.errors import ConfigurationError
from robotlab.testing import FunctionLLM, raise_, text
from robotlab_django import services, tasks
from robotlab_django.models import RobotResult, RunEvent, Status
from robotlab_django.runs import claims, executor, runner
from robotlab_django.runs.records import current_worker

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager() -> Iterator[None]:
    """Celery runs sent tasks in process (its own test mode), so the celery executor needs no broker here."""
    saved = current_app.conf.task_always_eager, current_app.conf.task_eager_propagates
    current_app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield
    finally:
        current_app.conf.update(task_always_eager=saved[0], task_eager_propagates=saved[1])


def test_the_task_is_configured_for_at_least_once_delivery_with_one_retry_layer() -> None:
    task = tasks.run_robot
    assert task.name == "robotlab_django.tasks.run_robot"
    assert task.acks_late is True and task.reject_on_worker_lost is True
    assert task.autoretry_for == (OperationalError, InterfaceError) and task.max_retries == 2
    assert not any(issubclass(ConfigurationError, kind) for kind in task.autoretry_for)


def test_the_task_runs_a_queued_run(scripted_llm: Any) -> None:
    scripted_llm(text("Hello from the task."))
    row = services.start_run("s1", "echo", "Hi")
    outcome = tasks.run_robot(row.pk)
    row.refresh_from_db()
    assert outcome == {"result_id": row.pk, "run_id": row.run_id, "status": "completed", "attempts": 1,
                       "skipped": False}
    assert (row.status, row.reply) == (Status.COMPLETED, "Hello from the task.")


def test_a_plain_run_records_the_worker_and_pid_that_ran_it(scripted_llm: Any, eager: None) -> None:
    """Issue 26 (16): ``worker`` and ``worker_pid`` were set for distributed network jobs only."""
    scripted_llm(text("Hello."), text("Again."))
    queued = services.start_run("s1", "echo", "Hi")
    tasks.run_robot.apply(args=(queued.pk,))  # Celery's in-process request: this host, this process
    queued.refresh_from_db()
    assert (queued.status, queued.worker, queued.worker_pid) == (Status.COMPLETED, socket.gethostname(), os.getpid())
    direct = services.run_robot("s1", "echo", "Again")  # no job at all: run here, now
    direct.refresh_from_db()
    assert (direct.worker, direct.worker_pid) == (socket.gethostname(), os.getpid())


def test_a_redelivered_run_never_runs_twice(scripted_llm: Any) -> None:
    llm = scripted_llm(text("once"))
    row = services.start_run("s1", "echo", "Hi")
    tasks.run_robot(row.pk)
    again = tasks.run_robot(row.pk)
    row.refresh_from_db()
    assert again["skipped"] is True and again["status"] == "completed"
    assert len(llm.requests) == 1 and row.attempts == 1 and row.reply == "once"


def test_a_run_that_used_up_its_attempts_is_failed_not_run(scripted_llm: Any, settings: Any) -> None:
    llm = scripted_llm(text("never"))
    row = services.start_run("s1", "echo", "Hi")
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RETRYING, attempts=3)
    outcome = tasks.run_robot(row.pk)
    row.refresh_from_db()
    assert outcome["skipped"] is True
    assert (row.status, row.error_type) == (Status.FAILED, "AttemptsExhausted")
    assert row.error == ("Gave up after 3 attempts (ROBOTLAB['TASK_MAX_ATTEMPTS'] is 3); its worker was lost "
                         "each time.")
    assert llm.requests == []
    assert list(RunEvent.objects.filter(result=row).values_list("kind", flat=True)) == ["run.failed",
                                                                                        "stream.ended"]


def test_a_configuration_error_fails_the_run_without_a_retry(scripted_llm: Any) -> None:
    llm = scripted_llm(raise_(ConfigurationError("No model configured")))
    row = services.start_run("s1", "echo", "Hi")
    applied = tasks.run_robot.apply(args=(row.pk,))
    row.refresh_from_db()
    assert applied.successful() and applied.result["status"] == "failed"
    assert (row.status, row.error_type, row.error, row.attempts) == (
        Status.FAILED, "ConfigurationError", "No model configured", 1)
    assert len(llm.requests) == 1


def test_a_missing_run_is_dropped() -> None:
    assert tasks.run_robot(987654)["status"] == "missing"


def test_the_celery_executor_sends_the_task_after_commit(scripted_llm: Any, settings: Any, eager: None,
                                                         django_capture_on_commit_callbacks: Any) -> None:
    scripted_llm(text("via celery"))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery"}
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        row = services.start_run("s1", "echo", "Hi")
        executor.dispatch(row)
        assert RobotResult.objects.get(pk=row.pk).status == Status.QUEUED  # nothing ran before the commit
    assert len(callbacks) == 1
    row.refresh_from_db()
    assert (row.status, row.reply) == (Status.COMPLETED, "via celery") and len(row.task_id) == 32


def test_a_rolled_back_transaction_sends_nothing(scripted_llm: Any, settings: Any, eager: None,
                                                 django_capture_on_commit_callbacks: Any) -> None:
    llm = scripted_llm(text("never"))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery"}
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        try:
            with transaction.atomic():
                executor.dispatch(services.start_run("s1", "echo", "Hi"))
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
    assert callbacks == [] and llm.requests == [] and not RobotResult.objects.exists()


def _stuck(status: str, attempts: int, minutes: int = 60) -> RobotResult:
    # a thread each: a reply queued behind a live one of its thread is held (robotlab_django.runs.thread_queue)
    row = services.start_run(f"s-stuck-{status}-{attempts}-{minutes}", "echo", "Hi")
    long_ago = timezone.now() - timedelta(minutes=minutes)
    RobotResult.objects.filter(pk=row.pk).update(status=status, attempts=attempts, started_at=long_ago,
                                                 updated_at=long_ago)
    return row


def test_requeue_stuck_requeues_lost_runs_and_fails_exhausted_ones(scripted_llm: Any, settings: Any) -> None:
    scripted_llm(text("recovered"), text("picked up"))
    lost, exhausted = _stuck(Status.RUNNING, 1), _stuck(Status.RUNNING, 3)
    fresh = _stuck(Status.RUNNING, 1, minutes=1)
    never_sent = _stuck(Status.QUEUED, 0)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "RUN_LEASE": 600}
    requeued, failed = executor.requeue_stuck()
    assert (requeued, failed) == ([lost.pk, never_sent.pk], [exhausted.pk])
    rows = {row.pk: row for row in RobotResult.objects.all()}
    assert rows[lost.pk].status == Status.COMPLETED and rows[lost.pk].attempts == 2  # sync executor ran it
    assert rows[never_sent.pk].status == Status.COMPLETED
    assert rows[exhausted.pk].status == Status.FAILED and rows[exhausted.pk].error_type == "AttemptsExhausted"
    assert rows[fresh.pk].status == Status.RUNNING


def test_a_turn_whose_task_runs_past_the_lease_is_not_released_while_its_task_lives(settings: Any) -> None:
    """A distributed turn's row only moves when a task ends: a task running long must not get the turn re-run.

    The turn row last moved an hour ago; its task row started a minute ago and is running. Only when the task is
    itself past the lease are both released.
    """
    settings.ROBOTLAB = {**settings.ROBOTLAB, "RUN_LEASE": 600}
    turn = _stuck(Status.RUNNING, 1)
    task = RobotResult.objects.create(thread_id=turn.thread_id, sequence_number=turn.sequence_number + 1,
                                      robot_name="echo", parent=turn, task_name="answer", status=Status.RUNNING,
                                      attempts=1, started_at=timezone.now() - timedelta(minutes=1))
    assert claims.release_stuck(dry_run=True) == ([], [])
    RobotResult.objects.filter(pk=task.pk).update(status=Status.AWAITING)  # a task waiting for its user
    assert claims.release_stuck(dry_run=True) == ([], [])
    RobotResult.objects.filter(pk=task.pk).update(status=Status.RUNNING, started_at=timezone.now() - timedelta(hours=1))
    assert claims.release_stuck(dry_run=True) == ([turn.pk, task.pk], [])


def test_the_requeue_command_reports_and_dry_run_changes_nothing(capsys: Any) -> None:
    lost = _stuck(Status.RUNNING, 1)
    call_command("robotlab_requeue_stuck", "--dry-run", "--lease", "60")
    assert capsys.readouterr().out.strip() == f"Would re-queue 1 run(s) [{lost.pk}]; would fail 0 run(s) []."
    assert RobotResult.objects.get(pk=lost.pk).status == Status.RUNNING


def test_the_requeue_command_refuses_a_bad_lease() -> None:
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="--lease must be greater than 0."):
        call_command("robotlab_requeue_stuck", "--lease", "0")


@pytest.mark.django_db(transaction=True)
def test_a_duplicated_retry_message_never_runs_a_live_run_twice(settings: Any) -> None:
    """Issue 25 item 8: a retry's number does not prove that the execution it retries is over.

    A copy of a retry message (``retries`` 1, not ``redelivered``) arrives while the first copy's execution
    is live: it does nothing, and the run calls the model once and starts once.
    """
    in_call, release = threading.Event(), threading.Event()

    def model(request: Any) -> Any:
        in_call.set()
        assert release.wait(timeout=30), "the test never released the model call"
        return text("once")

    llm = FunctionLLM(model)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
    row = services.start_run("s-dup", "echo", "Hi")
    outcomes: list[Any] = []

    def first() -> None:
        try:
            outcomes.append(tasks.run_robot.apply(args=(row.pk,), retries=1).result)
        finally:
            connections.close_all()

    live = threading.Thread(target=first)
    live.start()
    try:
        assert in_call.wait(timeout=30), "the first execution never called the model"
        duplicate = tasks.run_robot.apply(args=(row.pk,), retries=1).result
    finally:
        release.set()
        live.join(timeout=30)
    assert not live.is_alive()
    row.refresh_from_db()
    assert duplicate["skipped"] is True and duplicate["status"] == "running"
    assert outcomes[0]["status"] == "completed" and outcomes[0]["skipped"] is False
    assert (row.status, row.reply, row.attempts) == (Status.COMPLETED, "once", 1)
    assert len(llm.requests) == 1
    kinds = list(RunEvent.objects.filter(result=row).values_list("kind", flat=True))
    assert kinds.count("run.started") == 1 and kinds.count("run.completed") == 1


def test_a_retry_takes_over_a_run_only_when_its_claim_is_over(scripted_llm: Any) -> None:
    """A retry runs a ``running`` run again only when its claimant is gone, or its lease ran out."""
    llm = scripted_llm(text("again"))
    row = services.start_run("s-claim", "echo", "Hi")
    host, _pid = current_worker()
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    alive = os.getppid()
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RUNNING, attempts=1, started_at=timezone.now(),
                                                 worker="celery@elsewhere", worker_pid=gone.pid)
    assert runner.deliver(row.pk, retried=True)["skipped"] is True  # another host: it may still run there
    RobotResult.objects.filter(pk=row.pk).update(worker=host, worker_pid=alive)
    assert runner.deliver(row.pk, retried=True)["skipped"] is True  # a live process of this host runs it
    assert not claims.release_ended(row.pk, host) and llm.requests == []
    RobotResult.objects.filter(pk=row.pk).update(worker_pid=gone.pid)  # the pool child that claimed it died
    assert claims.release_ended(row.pk, host)
    assert RobotResult.objects.get(pk=row.pk).status == Status.RETRYING
    outcome = runner.deliver(row.pk, retried=True)
    assert (outcome["status"], outcome["attempts"], outcome["skipped"]) == ("completed", 2, False)
