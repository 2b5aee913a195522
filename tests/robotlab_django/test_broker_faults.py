"""The broker's Redis restarts with a run in flight (issue 25, item 7).

The scenario runs once, in a driver process (:mod:`tests.robotlab_django.broker_faults`) with a real prefork
worker and a private ``redis-server`` (skipped without one), on SQLite or, with ``ROBOTLAB_TEST_DB=postgres``,
PostgreSQL. What must hold: the run in flight completes once, the next run runs, and the node stays up. With
Celery 5.7.0 and kombu's own Redis transport the node exited (an ``AttributeError`` in kombu's Redis channel,
``robotlab_django.workers.redis_broker`` says where and why); the tests' Celery uses
that module's transport (``CELERY_BROKER_TRANSPORT`` in the tests' settings), as the docs tell sites to.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from tests.robotlab_django.faults import ROOT, database_env

TOKENS = 60


@pytest.fixture(scope="module")
def restart(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The facts of one broker restart (see the module docs)."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (scripts/services installs it)")
    workdir = tmp_path_factory.mktemp("broker")
    database, drop = database_env(workdir)
    env = {**os.environ, **database, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "PYTHONPATH": str(ROOT), "ROBOTLAB_TEST_LLM": "benchmarks.streaming.PacedLLM", "BENCH_TOKENS": str(TOKENS),
           "BENCH_RATE": "40"}
    try:
        driver = subprocess.run([sys.executable, "-m", "tests.robotlab_django.broker_faults", "--workdir",
                                 str(workdir)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        drop()
    logs = "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-6000:]}"
                     for log in sorted(workdir.glob("*.log")))
    assert driver.returncode == 0, f"{driver.stdout}\n{driver.stderr[-8000:]}\n{logs}"
    return {**json.loads(driver.stdout.strip().splitlines()[-1]), "logs": logs}


@pytest.mark.slow
def test_a_broker_restart_mid_run_completes_the_run_and_the_next_one(restart: dict[str, Any]) -> None:
    clean = "".join(f"t{index} " for index in range(TOKENS))
    assert restart["deltas_at_restart"] >= 2  # it was streaming when the broker went
    run = restart["run"]
    assert run["status"] == "completed", (run, restart["logs"])
    assert run["reply"] == clean and run["rows_on_thread"] == 1 and run["kinds"].count("run.completed") == 1
    second = restart["second"]
    assert second["status"] == "completed" and second["reply"] == clean, restart["logs"]


@pytest.mark.slow
def test_the_worker_node_survives_a_broker_restart(restart: dict[str, Any]) -> None:
    assert restart["transport"] == "robotlab_django.workers.redis_broker:Transport"
    assert restart["worker_alive"] and not restart["unrecoverable"], restart["logs"]
