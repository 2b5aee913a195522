"""One run through a real Celery worker process and the real Redis at 127.0.0.1:6379.

The worker (``celery -A tests.robotlab_django.celery_app worker --pool=solo``), the client and the
migration run as subprocesses sharing a SQLite file; Redis database 15 is the broker, the result
backend and the channel layer (channels-redis), so the run's events cross processes as in production.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
REDIS = ("127.0.0.1", 6379)
CLIENT = """
import asyncio, json, os, django
django.setup()
import tests.robotlab_django.celery_app  # a project imports its Celery app in its __init__.py
from asgiref.sync import async_to_sync
from django.db import transaction
from robotlab_django import services, tasks
from robotlab_django.runs import executor
from robotlab_django.models import RobotResult
from robotlab_django.streaming.broadcast import get_layer, thread_group

queue = {queue!r}
layer = get_layer()
thread = services.get_thread("worker-thread")
channel = async_to_sync(layer.new_channel)()
async_to_sync(layer.group_add)(thread_group(thread.pk), channel)
with transaction.atomic():
    row = services.start_run(thread, "echo", "Hello worker")
    task_id = executor.enqueue(row, queue=queue)
first = tasks.run_robot.AsyncResult(task_id).get(timeout=60)
duplicate = tasks.run_robot.apply_async(args=(row.pk,), queue=queue).get(timeout=60)

async def drain():
    events = []
    while not any(event["kind"] == "stream.ended" for event in events):
        message = await asyncio.wait_for(layer.receive(channel), 30)
        events.extend(message["events"])
    return events

events = async_to_sync(drain)()
row.refresh_from_db()
print(json.dumps({{"first": first, "duplicate": duplicate, "status": row.status, "reply": row.reply,
                  "attempts": row.attempts, "task_id": row.task_id == task_id,
                  "worker": row.worker, "worker_pid": row.worker_pid, "client_pid": os.getpid(),
                  "kinds": [event["kind"] for event in events],
                  "text": "".join(event.get("text", "") for event in events
                                  if event["kind"] == "text.delta")}}))
"""


def _redis_down() -> str | None:
    try:
        socket.create_connection(REDIS, timeout=3).close()
    except OSError as exc:
        return f"Redis at {REDIS[0]}:{REDIS[1]} cannot be reached: {exc}"
    return None


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    """The environment of every subprocess: test settings, a SQLite file, Redis database 15."""
    reason = _redis_down()
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "ROBOTLAB_TEST_DB": "sqlite",
           "ROBOTLAB_TEST_SQLITE_PATH": str(tmp_path / "db.sqlite3"),
           "ROBOTLAB_TEST_REDIS_URL": "redis://127.0.0.1:6379/15", "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    return env


@pytest.fixture
def celery_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """A real worker process on its own queue; killed after the test. Yields the queue name."""
    queue = f"robotlab-test-{uuid.uuid4().hex[:8]}"
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker", "--pool=solo",
         "-n", f"{queue}@%h", "-Q", queue, "-l", "info", "--without-heartbeat", "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=worker_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield queue
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
        log.close()


@pytest.mark.slow
def test_a_run_goes_through_a_real_worker_once_and_streams_through_redis(
        celery_worker: str, worker_env: dict[str, str], tmp_path: Path) -> None:
    client = subprocess.run([sys.executable, "-c", CLIENT.format(queue=celery_worker)], cwd=ROOT,
                            env=worker_env, capture_output=True, text=True, timeout=180)
    worker_log = (tmp_path / "worker.log").read_text()
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n--- worker ---\n{worker_log}"
    outcome = json.loads(client.stdout.strip().splitlines()[-1])
    assert outcome["first"]["status"] == "completed" and outcome["first"]["skipped"] is False
    assert outcome["duplicate"]["skipped"] is True and outcome["duplicate"]["status"] == "completed"
    assert outcome["status"] == "completed" and outcome["attempts"] == 1 and outcome["task_id"] is True
    assert outcome["reply"] and outcome["text"] == outcome["reply"]
    assert outcome["kinds"][0] == "run.started" and outcome["kinds"][-1] == "stream.ended"
    # who ran it: the worker's node name and its process (issue 26, item 16: empty for plain runs before)
    assert outcome["worker"].startswith(f"{celery_worker}@") and outcome["worker_pid"] not in (None,
                                                                                             outcome["client_pid"])
