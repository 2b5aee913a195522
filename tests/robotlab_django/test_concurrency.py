"""Many writers on one thread get unique, gap-free sequence numbers (PostgreSQL row locks).

The tests marked ``postgres`` run on the PostgreSQL test database. In the SQLite pass,
``test_the_postgres_tests_pass_on_postgres`` runs this file again on PostgreSQL in a subprocess,
so the concurrency tests always run; it skips only when no server answers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections

from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.models import RobotResult, Thread
from tests.robotlab_django.pg import postgres_unreachable

WRITERS = 8
RUNS_EACH = 5


def _concurrently(target: Any, count: int) -> list[BaseException]:
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            barrier.wait(timeout=10)
            target(index)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=work, args=(index,)) for index in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not any(worker.is_alive() for worker in workers), "a writer hung"
    return errors


@pytest.mark.usefixtures("postgres")
@pytest.mark.django_db(transaction=True)
def test_concurrent_runs_get_unique_gap_free_sequence_numbers() -> None:
    llm = FakeLLM(default=text("ok"))
    services.get_thread("shared")

    def writer(index: int) -> None:
        for run in range(RUNS_EACH):
            services.run_robot("shared", "echo", f"writer {index} run {run}", llm=llm)

    errors = _concurrently(writer, WRITERS)
    assert errors == []
    numbers = sorted(RobotResult.objects.filter(thread__session_id="shared").values_list("sequence_number", flat=True))
    assert numbers == list(range(1, WRITERS * RUNS_EACH + 1))
    assert RobotResult.objects.filter(status="completed").count() == WRITERS * RUNS_EACH


@pytest.mark.usefixtures("postgres")
@pytest.mark.django_db(transaction=True)
def test_concurrent_first_runs_create_one_thread() -> None:
    def writer(index: int) -> None:
        services.start_run("brand-new", "echo", f"hello {index}")

    assert _concurrently(writer, WRITERS) == []
    assert Thread.objects.filter(session_id="brand-new").count() == 1
    numbers = sorted(RobotResult.objects.values_list("sequence_number", flat=True))
    assert numbers == list(range(1, WRITERS + 1))


def test_the_postgres_tests_pass_on_postgres() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("already running on PostgreSQL")
    user = os.environ.get("PGUSER", "postgres")
    reason = postgres_unreachable({"HOST": "127.0.0.1", "PORT": 5432, "USER": user})
    if reason:
        pytest.skip(reason)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "ROBOTLAB_TEST_DB": "postgres"}
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__)), "-k", "not on_postgres"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stdout + process.stderr
    assert "2 passed" in process.stdout
