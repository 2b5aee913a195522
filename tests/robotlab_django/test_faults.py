"""Faults on the real stack: a killed worker, a dropped websocket, a restarted Redis (issue 6, acceptance 3).

Each test runs one scenario of :mod:`tests.robotlab_django.faults` in a driver process against a
database every process shares (a SQLite file; a fresh PostgreSQL database with
``ROBOTLAB_TEST_DB=postgres``), a real Celery worker or daphne, and Redis (127.0.0.1:6379 database
13, or a private ``redis-server``). The model streams ``BENCH_TOKENS`` tokens at ``BENCH_RATE``
tokens/s, so there is a stream to break. The tests skip only when Redis (or ``redis-server``) is
missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import WorkerLostError
from celery.signals import task_failure
from django.utils import timezone

from robotlab.testing import text
from robotlab_django import services, tasks
from robotlab_django.models import RobotResult, Status
from robotlab_django.runs import runner
from robotlab_django.runs.records import current_worker
from tests.robotlab_django.faults import ANSWER_TOKENS, REDIS_URL, ROOT, database_env, reachable

TOKENS = 60


def _scenario(tmp_path: Path, *args: str, tokens: int = TOKENS, rate: int = 40,
              publish_timeout: float = 5.0) -> dict[str, Any]:
    """Run ``python -m tests.robotlab_django.faults *args`` and return the facts it printed."""
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached (scripts/services starts it)")
    database, drop = database_env(tmp_path)
    env = {**os.environ, **database, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "PYTHONPATH": str(ROOT), "ROBOTLAB_TEST_REDIS_URL": REDIS_URL,
           "ROBOTLAB_TEST_LLM": "benchmarks.streaming.PacedLLM", "BENCH_TOKENS": str(tokens),
           "BENCH_RATE": str(rate), "ROBOTLAB_TEST_PUBLISH_TIMEOUT": str(publish_timeout)}
    try:
        driver = subprocess.run([sys.executable, "-m", "tests.robotlab_django.faults", *args,
                                 "--workdir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=300)
    finally:
        drop()
    logs = "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-6000:]}"
                     for log in sorted(tmp_path.glob("*.log")))
    assert driver.returncode == 0, f"{driver.stdout}\n{driver.stderr[-8000:]}\n{logs}"
    return dict(json.loads(driver.stdout.strip().splitlines()[-1]))


def _clean_text() -> str:
    """What one clean run of the paced model says."""
    return "".join(f"t{index} " for index in range(TOKENS))


@pytest.mark.django_db
def test_only_a_retry_or_a_redelivery_past_the_lease_takes_over_a_running_run(scripted_llm: Any) -> None:
    llm = scripted_llm(text("again"), text("once more"))
    row = services.start_run("s-lost", "echo", "Hi")
    host = current_worker()[0]  # claimed on this host by a live process (this test's parent)
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RUNNING, attempts=1, started_at=timezone.now(),
                                                 worker=host, worker_pid=os.getppid())
    assert runner.deliver(row.pk)["skipped"] is True  # a duplicate while it may still be running
    assert runner.deliver(row.pk, redelivered=True)["skipped"] is True  # redelivered within the lease
    assert runner.deliver(row.pk, retried=True, redelivered=True)["skipped"] is True  # a retry's duplicate
    assert runner.deliver(row.pk, retried=True)["skipped"] is True  # a retry's number proves nothing (issue 25)
    assert llm.requests == []
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()  # the pool child that claimed the run died
    RobotResult.objects.filter(pk=row.pk).update(worker_pid=child.pid)
    outcome = runner.deliver(row.pk, retried=True)  # the worker saw the child die and sent a retry
    assert (outcome["status"], outcome["attempts"], outcome["skipped"]) == ("completed", 2, False)
    assert runner.deliver(row.pk, retried=True)["skipped"] is True  # a finished run is never run again

    other = services.start_run("s-lost", "echo", "Hi")
    long_ago = timezone.now() - timedelta(seconds=1000)  # past RUN_LEASE (900 s)
    RobotResult.objects.filter(pk=other.pk).update(status=Status.RUNNING, attempts=1, started_at=long_ago)
    assert runner.deliver(other.pk, redelivered=True)["status"] == "completed"
    assert RobotResult.objects.get(pk=other.pk).reply == "once more" and len(llm.requests) == 2


@pytest.mark.django_db
def test_a_worker_lost_past_the_retries_fails_the_run_once_its_attempts_are_used_up() -> None:
    spent, fresh = services.start_run("s-lost", "echo", "Hi"), services.start_run("s-lost", "echo", "Hi")
    RobotResult.objects.filter(pk=spent.pk).update(status=Status.RUNNING, attempts=3)
    RobotResult.objects.filter(pk=fresh.pk).update(status=Status.RUNNING, attempts=1)
    for row in (spent, fresh):  # what Celery's main process sends when it acks the lost message
        task_failure.send(sender=tasks.run_robot, task_id="t", exception=WorkerLostError("SIGKILL"), args=(row.pk,))
    task_failure.send(sender=tasks.run_robot, task_id="t", exception=ValueError("other"), args=(fresh.pk,))
    spent.refresh_from_db()
    fresh.refresh_from_db()
    assert (spent.status, spent.error_type) == (Status.FAILED, "AttemptsExhausted")
    assert fresh.status == Status.RUNNING  # attempts left: robotlab_requeue_stuck re-queues it


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["child", "node"])
def test_a_worker_killed_mid_run_completes_it_on_redelivery_exactly_once(tmp_path: Path, mode: str) -> None:
    facts = _scenario(tmp_path, "worker-kill", "--mode", mode)
    run, clean = facts["run"], facts["clean"]
    assert facts["killed"] and facts["deltas_at_kill"] >= 2  # it was streaming when it died
    assert clean["status"] == "completed" and clean["attempts"] == 1 and clean["reply"] == _clean_text()
    assert run["status"] == "completed", run["error"]
    assert run["attempts"] == 2  # the killed attempt and the one that finished
    assert run["rows_on_thread"] == 1
    assert run["reply"] == clean["reply"]  # no duplicated or missing text
    assert run["replayed_text"] == clean["reply"]  # a client replaying the stored events ends with it too
    assert run["kinds"].count("run.started") == 2
    assert run["kinds"].count("run.completed") == 1 and run["kinds"][-1] == "stream.ended"


@pytest.mark.slow
@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoints", "no-checkpoints"])
def test_a_run_executed_again_after_a_kill_sends_only_the_llm_call_in_flight_again(tmp_path: Path,
                                                                                  checkpoints: bool) -> None:
    facts = _scenario(tmp_path, "step-kill", *([] if checkpoints else ["--no-checkpoints"]))
    run = facts["run"]
    assert run["status"] == "completed", run["error"]
    assert run["attempts"] == 2 and run["rows_on_thread"] == 1
    answer = " ".join(f"tok{index}" for index in range(ANSWER_TOKENS))
    assert run["reply"] == run["replayed_text"] == answer  # no duplicated or missing text
    assert facts["final_messages"] == 1 and run["kinds"].count("run.completed") == 1  # B5: no duplicate finals
    assert facts["answer_requests"] == 2  # the call in flight at the kill is sent again: its stream was lost
    if checkpoints:  # B5: completed LLM steps re-issued = 0, and the tool's side effect happened once
        assert (facts["completed_llm_steps_reissued"], facts["tool_runs"]) == (0, 1)
        assert facts["steps"] == [[0, "llm"], [1, "tool"], [2, "llm"]]
    else:  # the control: without checkpoints the first LLM call and the tool run again
        assert (facts["completed_llm_steps_reissued"], facts["tool_runs"]) == (1, 2)
        assert facts["steps"] == []


@pytest.mark.slow
def test_a_run_that_kills_its_worker_every_time_is_failed_after_its_attempts(tmp_path: Path) -> None:
    facts = _scenario(tmp_path, "poison-run")
    run = facts["run"]
    assert facts["kills"] == facts["limit"] == 3  # ROBOTLAB["TASK_MAX_ATTEMPTS"]
    assert (run["status"], run["error_type"], run["attempts"]) == ("failed", "AttemptsExhausted", 3)
    assert run["error"] == ("Gave up after 3 attempts (ROBOTLAB['TASK_MAX_ATTEMPTS'] is 3); its worker was "
                            "lost each time.")
    assert run["kinds"].count("run.started") == 3 and "run.completed" not in run["kinds"]
    assert run["kinds"][-2:] == ["run.failed", "stream.ended"], run["kinds"]
    assert run["rows_on_thread"] == 1


@pytest.mark.slow
def test_a_dropped_websocket_resumes_after_its_cursor_and_ends_with_the_saved_text(tmp_path: Path) -> None:
    facts = _scenario(tmp_path, "socket-drop", "--drops", "4", tokens=200, rate=100)
    run = facts["run"]
    assert run["status"] == "completed" and run["reply"] == "".join(f"t{index} " for index in range(200))
    assert facts["connects"] >= 5  # four cuts, four resumes
    assert facts["replayed"] > 0  # what went out while the client was away came back in the replay
    assert facts["client_text"] == run["reply"] == run["replayed_text"]


@pytest.mark.slow
def test_a_redis_restart_mid_stream_loses_nothing_saved(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    facts = _scenario(tmp_path, "redis-restart", tokens=200, rate=50)
    run = facts["run"]
    assert facts["deltas_during"] >= 3  # the run kept storing events with the layer down
    assert run["status"] == "completed", run["error"]
    assert run["reply"] == "".join(f"t{index} " for index in range(200))
    assert facts["connects"] >= 2  # the client lost its socket and came back
    assert facts["replayed"] > 0  # the events of the outage came from the stored rows
    assert facts["live_after_reconnect"] > 0  # and the worker publishes live again after the restart
    assert facts["client_text"] == run["reply"] == run["replayed_text"]


@pytest.mark.slow
def test_a_hung_redis_mid_stream_is_healed_without_a_reconnect(tmp_path: Path) -> None:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    facts = _scenario(tmp_path, "redis-hang", tokens=200, rate=50, publish_timeout=0.3)
    run = facts["run"]
    assert facts["deltas_during"] >= 3  # the worker gave up on each send and kept storing
    assert run["status"] == "completed", run["error"]
    assert run["reply"] == "".join(f"t{index} " for index in range(200))
    assert facts["connects"] == 1  # the socket stayed up through the outage
    assert facts["healed"] > 0  # the batches lost in it came from the rows, ahead of the next live one
    assert facts["client_text"] == run["reply"] == run["replayed_text"]

