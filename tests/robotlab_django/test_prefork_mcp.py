"""A robot with a stdio MCP server runs in a real prefork Celery worker whose parent already used one.

The worker (``celery -A tests.robotlab_django.fork_celery worker --pool=prefork``) runs the
``clock`` robot in its main process at ``worker_init`` (RobotLab's background loop and an
``mcp-server-time`` session are live there), then forks its pool; a client sends a run of the same
robot, which a pool child executes.

Without the at-fork reset of ``robotlab.runtime`` the child's run hangs: the loop it inherited
has no thread, and the client's wait for the task times out (checked: 90 s, then
``celery.exceptions.TimeoutError``). Without the reset of ``robotlab.mcp.connections`` alone, the
child waits on the parent's session until the server's 60 s timeout and the robot runs without
the server's tools (``unknown tool 'get_current_time'``). Redis database 11 is the broker, result
backend and channel layer; the database is a SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.robotlab_django.faults import reachable

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/11"
#: Seconds the client waits for the pool child's run.
WAIT = 90
CLIENT = """
import json, django
django.setup()
import tests.robotlab_django.fork_celery
from django.db import transaction
from robotlab_django import services, tasks
from robotlab_django.runs import executor

with transaction.atomic():
    row = services.start_run(services.get_thread("prefork-mcp"), "clock", "What time is it?")
    task_id = executor.enqueue(row, queue={queue!r})
outcome = tasks.run_robot.AsyncResult(task_id).get(timeout={wait})
row.refresh_from_db()
print(json.dumps({{"status": row.status, "reply": row.reply, "error": row.error, "task": outcome["status"]}}))
"""


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    """Test settings, a SQLite file, Redis database 11, and where the parent marks its MCP use."""
    # imported here, not at collection, and the settings put back: the module sets ROBOTLAB["ROBOTS"] for the
    # worker, which leaked into every later test of this process (test_conf's defaults check failed on it)
    from django.conf import settings

    saved = settings.ROBOTLAB
    from tests.robotlab_django.fork_celery import MARK_ENV, TIME_SERVER

    settings.ROBOTLAB = saved

    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached")
    if not Path(TIME_SERVER).exists():
        pytest.skip("mcp-server-time is not installed")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "ROBOTLAB_TEST_DB": "sqlite",
           "ROBOTLAB_TEST_SQLITE_PATH": str(tmp_path / "db.sqlite3"), "ROBOTLAB_TEST_REDIS_URL": REDIS_URL,
           MARK_ENV: str(tmp_path / "parent.json"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    return env


@pytest.fixture
def prefork_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """A prefork worker (one pool child) on its own queue; stopped after the test. Yields the queue."""
    queue = f"robotlab-prefork-{uuid.uuid4().hex[:8]}"
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.fork_celery", "worker", "--pool=prefork",
         "--concurrency=1", "-Q", queue, "-l", "info", "--without-heartbeat", "--without-gossip",
         "--without-mingle"],
        cwd=ROOT, env=worker_env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield queue
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
        log.close()


@pytest.mark.slow
def test_a_pool_child_runs_an_mcp_robot_after_its_parent_used_one(
        prefork_worker: str, worker_env: dict[str, str], tmp_path: Path) -> None:
    client = subprocess.run([sys.executable, "-c", CLIENT.format(queue=prefork_worker, wait=WAIT)], cwd=ROOT,
                            env=worker_env, capture_output=True, text=True, timeout=WAIT + 60)
    worker_log = (tmp_path / "worker.log").read_text()
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n--- worker ---\n{worker_log}"
    outcome = json.loads(client.stdout.strip().splitlines()[-1])
    parent = json.loads((tmp_path / "parent.json").read_text())

    assert parent["reply"].startswith(f"pid {parent['pid']}: ") and '"timezone": "UTC"' in parent["reply"]
    assert outcome["status"] == outcome["task"] == "completed", outcome
    pid, _, answer = outcome["reply"].partition(": ")
    assert pid.startswith("pid ") and int(pid[4:]) != parent["pid"]  # a forked pool child ran it
    assert '"timezone": "UTC"' in answer and '"datetime": ' in answer
