"""benchmarks/history.py runs standalone and its query counts hold (timings are reported, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_history_benchmark_runs_and_query_counts_stay_flat() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "history.py"
    process = subprocess.run([sys.executable, str(script), "--db", "sqlite", "--repeat", "2", "--json"],
                             capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr
    report = json.loads(process.stdout)
    result = report["results"][0]
    assert result["vendor"] == "sqlite" and result["history_messages"] == 1000
    assert result["history_queries"] <= report["targets"]["history_queries"]
    assert result["admin_queries"] == result["admin_queries_last_page"] == result["admin_queries_20_rows"]
    assert result["history_ms_median"] > 0 and result["admin_ms_median"] > 0


def test_network_jobs_benchmark_runs_turns_and_their_queries_stay_within_the_measured_counts() -> None:
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "network_jobs.py"
    process = subprocess.run([sys.executable, str(script), "--turns", "2", "--json"],
                             capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stderr  # it raises unless every turn completed
    report = json.loads(process.stdout)
    jobs = report["jobs"]
    assert {kind: figures["jobs"] for kind, figures in jobs.items()} == {"turn+plan": 1, "branch": 7,
                                                                         "branch+reduce": 1}
    # measured: 128 a turn, 11 a branch job, on SQLite and PostgreSQL (347 and 29.7 before issue 31's inline tasks
    # and lighter jobs, see docs/django/distributed-networks.md); issue 31 asks 12 and 130 on PostgreSQL
    assert jobs["branch"]["queries"] <= 12
    assert report["per_turn"]["queries"] <= 130
    assert all(figures["besides_model_ms"] <= figures["cpu_ms"] for figures in jobs.values())
    assert all(figures["cpu_ms"] > 0 for figures in jobs.values())
