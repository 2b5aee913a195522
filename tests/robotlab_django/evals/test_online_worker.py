"""Online evals under Celery: a real worker runs the run, then scores it in a task of its own, off the run's path."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.robotlab_django.settings import TASK_QUEUE
from tests.robotlab_django.workers.test_warm_up import ROOT, worker_env  # noqa: F401 (a fixture)

CLIENT = """
import json, os, threading, time, django
django.setup()
import tests.robotlab_django.celery_app  # a project imports its Celery app in its __init__.py
from django.db import transaction
from robotlab_django import services, tasks
from robotlab_django.models import OnlineScore
from robotlab_django.runs import executor

with transaction.atomic():
    row = services.start_run("online-worker", "echo", "Hello")
    task_id = executor.enqueue(row)
tasks.run_robot.AsyncResult(task_id).get(timeout=60)
row.refresh_from_db()
deadline, pause = time.monotonic() + 60, threading.Event()
score = None
while score is None and time.monotonic() < deadline:
    score = OnlineScore.objects.filter(run_id=row.run_id).first()
    if score is None:
        pause.wait(0.05)
print(json.dumps({"status": row.status, "worker": row.worker, "score": score and score.score,
                  "kinds": score and [item["kind"] for item in score.scores], "result": score and score.result_id,
                  "row": row.pk, "client_pid": os.getpid(), "worker_pid": row.worker_pid}))
"""

ONLINE = {"echo": {"rate": 1.0, "evaluators": [{"kind": "contains", "value": "demo"}]}}


@pytest.fixture
def online_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[dict[str, str]]:  # noqa: F811
    """A real worker on this run's queue (where both tasks go), running and scoring ``echo``'s runs."""
    env = {**worker_env, "ROBOTLAB_TEST_EXECUTOR": "celery", "ROBOTLAB_TEST_ONLINE_EVALS": json.dumps(ONLINE)}
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker", "--pool=solo",
         "-n", f"online-{TASK_QUEUE}@%h", "-Q", TASK_QUEUE, "-l", "info", "--without-heartbeat", "--without-gossip",
         "--without-mingle"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield env
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()


@pytest.mark.slow
def test_a_celery_worker_runs_the_run_then_scores_it_in_its_own_task(online_worker: dict[str, str],
                                                                     tmp_path: Path) -> None:
    client = subprocess.run([sys.executable, "-c", CLIENT], cwd=ROOT, env=online_worker, capture_output=True,
                            text=True, timeout=180)
    worker_log = (tmp_path / "worker.log").read_text()
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n--- worker ---\n{worker_log}"
    outcome = json.loads(client.stdout.strip().splitlines()[-1])
    assert outcome["status"] == "completed" and outcome["worker_pid"] != outcome["client_pid"]
    assert (outcome["score"], outcome["kinds"], outcome["result"]) == (1.0, ["contains"], outcome["row"])
    assert "robotlab_django.evals.score_online_run" in worker_log  # registered, received and run by the worker
    assert "Received unregistered task" not in worker_log
