"""A Celery worker process warms up before its first job (robotlab_django.workers.warm_up).

In a process of its own (as a solo pool's): the warm-up builds the registered robots (leaving out one whose factory
fails), learns their models, reads the tables and opens the direct client's pool on robotlab's loop. Through a real
prefork worker (Redis database 15, a SQLite file, a fake OpenAI-compatible server): the main process prepares before
it forks, the pool child opens its pool before it takes its first job.
No timing is asserted here; benchmarks/worker_first_job.py measures what it saves.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotlab.testing.server import FakeLLMServer
from robotlab_django.workers import warm_up as worker
from tests.robotlab_django.faults import reachable, wait_for

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default="Hello from the fake server") as running:
        yield running


WARM = """
import json, os, django
django.setup()
from robotlab.runtime import get_loop
from robotlab.llm import AutoLLM
from robotlab_django.workers import warm_up as worker
from robotlab_django.registry import registry
from robotlab_django.runs import step_writer
from django.db import connection

def broken(**options):
    raise RuntimeError("needs a service that is not there yet")

registry.register(broken, name="broken-at-start")
worker.prepare()  # as the main process does before it forks
done = worker.warm()
route, client = AutoLLM(api_base=os.environ["ROBOTLAB_TEST_FAKE_API_BASE"], api_key="sk-fake").route({model!r})
# the thread that stores checkpoints has its connection open already (asked on that thread, after the warm-up)
steps_open = step_writer.submit(lambda: connection.connection is not None).result(timeout=10)
print(json.dumps({{"pids": [worker.WARMED["prepare"].pid, done.pid, os.getpid()], "stage": done.stage,
                  "models": sorted({{model for model, _llm in done.models}}), "notes": done.notes,
                  "pool": route == "direct" and client._clients.get(get_loop()) is not None,
                  "steps_open": steps_open}}))
"""


def test_warming_builds_the_registered_robots_and_opens_the_direct_clients_pool(
        worker_env: dict[str, str], server: FakeLLMServer) -> None:
    # a process of its own, as a solo pool's: prepared and warmed there (a factory that fails is left out)
    run = subprocess.run([sys.executable, "-c", WARM.format(model=MODEL)], cwd=ROOT, env=worker_env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    done = json.loads(run.stdout.strip().splitlines()[-1])
    assert done["stage"] == "warm" and len(set(done["pids"])) == 1  # prepared there, nothing was inherited
    assert done["models"] == [MODEL]
    assert f"{MODEL}: direct" in done["notes"] and f"pool open: {server.base_url}" in done["notes"]
    assert "database connection open" in done["notes"] and "channel layer: InMemoryChannelLayer" in done["notes"]
    assert "price table read" in done["notes"] and any(note.endswith(" tables read") for note in done["notes"])
    assert done["pool"] is True  # the jobs' loop has its pool
    assert done["steps_open"] is True  # and the step writer, its database connection
    assert f"rehearsed a run of {MODEL} ('Ready.')" in done["notes"]  # a robot of its own, answered in memory
    assert server.requests == []  # nothing was sent to the model


def test_a_database_that_cannot_be_opened_skips_only_the_steps_that_need_it(
        worker_env: dict[str, str], server: FakeLLMServer, tmp_path: Path) -> None:
    env = {**worker_env, "ROBOTLAB_TEST_SQLITE_PATH": str(tmp_path / "no-such-folder" / "db.sqlite3")}
    run = subprocess.run([sys.executable, "-c", WARM.format(model=MODEL)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout.strip().splitlines()[-1])["notes"]
    assert any(note.startswith("tables skipped (OperationalError") for note in notes), notes
    assert any(note.startswith("database skipped (OperationalError") for note in notes), notes
    assert f"pool open: {server.base_url}" in notes and "price table read" in notes  # the rest was done


def test_a_channel_layer_that_cannot_be_reached_is_noted_and_the_rest_is_done(
        worker_env: dict[str, str], server: FakeLLMServer) -> None:
    env = {**worker_env, "ROBOTLAB_TEST_REDIS_URL": "redis://127.0.0.1:9/0"}  # nothing listens on port 9
    run = subprocess.run([sys.executable, "-c", WARM.format(model=MODEL)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout.strip().splitlines()[-1])["notes"]
    assert any(note.startswith("channel layer skipped (") for note in notes), notes
    assert "database connection open" in notes and f"pool open: {server.base_url}" in notes


def test_the_setting_turns_it_off(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker, "WARMED", {})
    settings.ROBOTLAB = {**settings.ROBOTLAB, "WORKER_WARM_UP": False}
    worker._warm_process()
    worker._prepare_worker()
    assert worker.WARMED == {}


@pytest.fixture
def worker_env(tmp_path: Path, server: FakeLLMServer) -> dict[str, str]:
    """Test settings, a SQLite file, Redis database 15, the app's robots on the fake server."""
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "PYTHONPATH": str(ROOT),
           "ROBOTLAB_TEST_DB": "sqlite", "ROBOTLAB_TEST_SQLITE_PATH": str(tmp_path / "db.sqlite3"),
           "ROBOTLAB_TEST_LLM": "tests.robotlab_django.server_llm.fake_server_llm",
           "ROBOTLAB_TEST_FAKE_API_BASE": server.base_url, "ROBOT_LAB_MODEL": MODEL}
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    return env


def logged(path: Path, mark: str) -> str | None:
    """The log's text once it holds ``mark``."""
    text = path.read_text()
    return text if mark in text else None


CLIENT = """
import json, django
django.setup()
import tests.robotlab_django.celery_app  # a project imports its Celery app in its __init__.py
from django.db import transaction
from robotlab_django import services, tasks
from robotlab_django.runs import executor

with transaction.atomic():
    row = services.start_run(services.get_thread("warm-worker"), "echo", "Hello worker")
    task_id = executor.enqueue(row, queue={queue!r})
print(json.dumps(tasks.run_robot.AsyncResult(task_id).get(timeout=120)))
"""


@pytest.mark.slow
def test_a_prefork_child_warms_up_before_its_first_job(worker_env: dict[str, str], server: FakeLLMServer,
                                                        tmp_path: Path) -> None:
    queue = f"robotlab-warm-{uuid.uuid4().hex[:8]}"
    # channels-redis on database 15: its keys carry this run's prefix (settings.REDIS_PREFIX, from its run id)
    worker_env = {**worker_env, "ROBOTLAB_TEST_REDIS_URL": "redis://127.0.0.1:6379/15"}
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker", "--pool=prefork",
             "-c", "1", "-Q", queue, "-l", "info", "--without-heartbeat", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=worker_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        client = subprocess.run([sys.executable, "-c", CLIENT.format(queue=queue)], cwd=ROOT, env=worker_env,
                                capture_output=True, text=True, timeout=180)
        assert client.returncode == 0, f"{client.stderr}\n--- worker ---\n{log_path.read_text()}"
        assert json.loads(client.stdout.strip().splitlines()[-1])["status"] == "completed"
        text = wait_for(lambda: logged(log_path, "succeeded in"), "the task's log line")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    line = re.search(r"robotlab worker warm-up \(warm\) in process (\d+): \d+ ms \(prepared in process (\d+) "
                     r"in \d+ ms\); (.*)", text)
    assert line, text
    child, parent = int(line.group(1)), int(line.group(2))
    assert parent == process.pid and child != process.pid  # prepared before the fork, warmed in the child
    assert f"{MODEL}: direct" in line.group(3) and f"pool open: {server.base_url}" in line.group(3)
    assert "price table read" in line.group(3) and "database connection open" in line.group(3)
    assert "channel layer connected" in line.group(3) and "result backend connected" in line.group(3)
    assert text.index(line.group(0)) < text.index("succeeded in")  # before its first job
    assert server.requests[0]["model"] == "gpt-4o-mini"  # the job's model call, the only one
    assert len(server.requests) == 1
