"""Side effects exactly once under a SIGKILLed Celery worker (issue 27, item 5, acceptance).

Each test runs one scenario of :mod:`tests.robotlab_django.effect_faults` in a driver process against a database
every process shares (a SQLite file; a fresh PostgreSQL database with ``ROBOTLAB_TEST_DB=postgres``), a real Celery
worker with one prefork child, Redis (127.0.0.1:6379) as the broker, and a fake OpenAI-compatible server. The tests
count the side effects: the lines ``send_mail`` wrote, the notes the model tool created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.robotlab_django.faults import ANSWER_TOKENS, REDIS_URL, ROOT, database_env, reachable


def _scenario(tmp_path: Path, *args: str) -> dict[str, Any]:
    """Run ``python -m tests.robotlab_django.effect_faults *args`` and return the facts it printed."""
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached (scripts/services starts it)")
    database, drop = database_env(tmp_path)
    env = {**os.environ, **database, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "PYTHONPATH": str(ROOT), "ROBOTLAB_TEST_REDIS_URL": REDIS_URL}
    try:
        driver = subprocess.run([sys.executable, "-m", "tests.robotlab_django.effect_faults", *args,
                                 "--workdir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=300)
    finally:
        drop()
    logs = "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-6000:]}"
                     for log in sorted(tmp_path.glob("*.log")))
    assert driver.returncode == 0, f"{driver.stdout}\n{driver.stderr[-8000:]}\n{logs}"
    return dict(json.loads(driver.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_kill_inside_a_side_effecting_tool_parks_the_run_and_the_effect_is_not_repeated(tmp_path: Path) -> None:
    facts = _scenario(tmp_path, "tool-kill")
    parked = facts["at_park"]
    assert facts["killed"]
    assert (parked["status"], parked["attempts"], parked["lines"]) == ("awaiting", 2, 1)  # the retry did not send
    assert "An effect's outcome is unknown" in parked["question"]["question"] and parked["hitl_requested"] == 1
    [effect] = parked["effects"]
    assert (effect["status"], effect["tool_name"], effect["attempts"], effect["atomic"]) == (
        "unknown", "send_mail", 1, False)
    assert parked["question"]["effect"] is not None
    assert parked["requests"] == 1  # the retry replayed the model's tool call from its checkpoint
    # marked done (as in the admin), the run goes on with the given result, and the mail is still sent once
    run = facts["run"]
    assert run["status"] == "completed", run["error"]
    assert (run["reply"], facts["lines"], facts["requests"]) == ("Mail sent.", 1, 2)
    assert facts["last_tool_result"] == "sent to ada (checked by hand)"
    assert [effect["status"] for effect in facts["effects"]] == ["completed"]
    assert run["kinds"].count("run.completed") == 1 and run["rows_on_thread"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoints", "no-checkpoints"])
def test_a_kill_after_a_model_tools_write_committed_never_writes_again(tmp_path: Path, checkpoints: bool) -> None:
    facts = _scenario(tmp_path, "write-kill", *([] if checkpoints else ["--no-checkpoints"]))
    run = facts["run"]
    assert facts["killed"]
    assert run["status"] == "completed", run["error"]
    assert facts["notes"] == ["milk"]  # written once: the write count
    [effect] = facts["effects"]
    assert (effect["status"], effect["tool_name"], effect["atomic"], effect["attempts"]) == (
        "completed", "create_note", True, 1)
    assert run["attempts"] == 2 and run["rows_on_thread"] == 1  # the killed attempt and the one that finished
    assert run["reply"] == " ".join(f"tok{index}" for index in range(ANSWER_TOKENS))
    assert facts["final_messages"] == 1 and run["kinds"].count("run.completed") == 1  # completed once
    if checkpoints:  # the model's tool call replayed from its step; the tool's step too, or its journal row
        assert facts["tool_call_requests"] == 1
    else:  # the model asked again (the same call id): only the journal kept the write from happening twice
        assert facts["tool_call_requests"] == 2 and facts["steps"] == []
