"""A parked run survives its worker: parked on one Celery worker process, answered while another runs.

The driver (tests/robotlab_django/park_worker.py) runs in its own process against a database file and
Redis database 9, and counts the requests at a fake OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robotlab_django.faults import ROOT, reachable


def test_a_parked_run_completes_once_on_a_new_worker_without_reissuing_its_llm_step(tmp_path: Path) -> None:
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached (scripts/services starts it)")
    path = os.pathsep.join(part for part in (str(ROOT), os.environ.get("PYTHONPATH", "")) if part)
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "PYTHONPATH": path}
    driver = subprocess.run([sys.executable, "-m", "tests.robotlab_django.park_worker", "--workdir", str(tmp_path)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    logs = "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-6000:]}"
                     for log in sorted(tmp_path.glob("*.log")))
    assert driver.returncode == 0, f"{driver.stdout}\n{driver.stderr[-8000:]}\n{logs}"
    facts = json.loads(driver.stdout.strip().splitlines()[-1])
    assert facts["parked_status"] == "awaiting"
    assert facts["question"]["question"] == "Which plan?" and facts["question"]["choices"] == ["basic", "pro"]
    assert facts["first_worker_exit"] is not None and facts["second_worker_alive"]
    assert facts["requests_before_answer"] == 1
    assert facts["requests"] == 2 and facts["asks_sent"] == 1  # the completed LLM step was not sent again
    assert facts["answer_given"] == "pro"  # "2" picked the second choice
    assert facts["status"] == "completed" and facts["reply"] == "You are on the pro plan.", facts
    assert facts["completed_events"] == 1
    assert facts["first_worker_log"] == ["awaiting"] and facts["second_worker_log"] == ["completed"]
    assert facts["steps"] == [[0, "llm"], [1, "tool"], [2, "llm"]]
