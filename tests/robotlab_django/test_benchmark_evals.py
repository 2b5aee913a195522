"""benchmarks/eval_workers.py runs end to end (Celery workers, Redis, the fake server, ``manage.py robotlab_eval``).

Tiny sizes: 10 cases, 1 and 2 worker processes. No timing is asserted; that every case ran as a Celery job on the
workers, every worker process took some, ``--concurrency`` bounded the cases in flight, and the exit status
followed the threshold are.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_eval_benchmark_runs_the_cases_on_every_worker_and_gates_on_the_threshold() -> None:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=3).close()
    except OSError as exc:
        pytest.skip(f"Redis at 127.0.0.1:6379 cannot be reached: {exc}")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "eval_workers.py"
    options = ["--cases", "10", "--latency", "0.05", "--counts", "1,2", "--concurrency", "4", "--json"]
    process = subprocess.run([sys.executable, str(script), *options], capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    report = json.loads(process.stdout)
    results = {result["processes"]: result for result in report["results"]}
    assert results.keys() == {1, 2}
    for count, result in results.items():
        # every tenth case expects another reply: 9 of 10 pass, over --threshold 0.85 and under 0.95
        assert (result["passed"], result["cases"], result["score"]) == (9, 10, 0.9)
        assert result["exit"] == 0 and result["under"] == 3
        assert result["workers"] == count  # the cases ran as Celery jobs, on every worker process
        assert 0 < result["duration"] < result["wall"]
        assert result["in_flight"] == count  # --concurrency 4: as many cases at once as worker processes
        assert result["under_in_flight"] == 1  # --concurrency 1: one case at a time, whatever the workers
    assert report["ratio"] == results[2]["wall"] / results[1]["wall"]
