"""A network turn across two real Celery worker processes (prefork, one child each) on Redis database 10.

The workers consume this run's queue (``TASK_QUEUE``), and every key they make carries this run's prefix
(tests/robotlab_django/settings.py), so another checkout's run on the same Redis never takes their jobs.

The client (tests/robotlab_django/network_workers.py) runs in its own process with the fake OpenAI-compatible
server the workers' robots call; every process shares one SQLite file. The ``fanout`` network is
plan -> branch_1..branch_4 -> reduce; each branch makes a tool call, then answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.robotlab_django.faults import Processes, free_port, reachable
from tests.robotlab_django.settings import TASK_QUEUE

ROOT = Path(__file__).resolve().parents[2]
REDIS_URL = "redis://127.0.0.1:6379/10"

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Processes, dict[str, str]]]:
    """Two Celery workers (``w1``, ``w2``: prefork, one child each) on this run's queue, and their environment."""
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached")
    port = free_port()
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "PYTHONPATH": path,
           "ROBOTLAB_TEST_DB": "sqlite", "ROBOTLAB_TEST_SQLITE_PATH": str(tmp_path / "db.sqlite3"),
           "ROBOTLAB_TEST_REDIS_URL": REDIS_URL, "ROBOTLAB_TEST_EXECUTOR": "celery",
           "ROBOTLAB_TEST_NETWORKS": json.dumps({"fanout": "tests.robotlab_django.fanout.fanout_network",
                                                 "relay": "tests.robotlab_django.fanout.relay_network",
                                                 "notesnet": "tests.robotlab_django.notes_network.notes_network"}),
           "ROBOTLAB_TEST_MEMORY_URL": REDIS_URL,
           "ROBOTLAB_TEST_LLM": "tests.robotlab_django.fanout.server_llm",
           "ROBOTLAB_TEST_LLM_PORT": str(port), "ROBOTLAB_TEST_LLM_BASE": f"http://127.0.0.1:{port}/v1",
           "ROBOTLAB_TEST_NOTES": str(tmp_path / "notes.txt"),
           # the spans of the runs kept (the app's own SDK tracer provider), written every 50 ms
           "ROBOTLAB_TEST_TRACES": "1", "OTEL_BSP_SCHEDULE_DELAY": "50"}
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                   timeout=120)
    processes = Processes(tmp_path, env)
    for name in ("w1", "w2"):
        processes.start(name, [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker",
                               "--pool=prefork", "-c", "1", "-Q", TASK_QUEUE, "-n", f"{name}@%h", "-l", "info",
                               "--without-heartbeat", "--without-gossip", "--without-mingle"])
    try:
        yield processes, env
    finally:
        processes.stop_all()


def completed(name: str, env: dict[str, str], workdir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The facts of scenario ``name``, whose turn must have completed, and its task rows by task name."""
    facts = scenario(name, env, workdir)
    assert facts["status"] == "completed", facts["error"]
    return facts, {t["task"]: t for t in facts["tasks"]}


def scenario(name: str, env: dict[str, str], workdir: Path) -> dict[str, Any]:
    client = subprocess.run([sys.executable, "-m", "tests.robotlab_django.network_workers", name], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=300)
    logs = "\n".join(f"--- {p.name} ---\n{p.read_text()[-4000:]}" for p in sorted(workdir.glob("w*.log")))
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n{logs}"
    facts: dict[str, Any] = json.loads(client.stdout.strip().splitlines()[-1])
    return facts


def test_the_branches_of_a_turn_run_on_both_workers_and_match_a_one_process_run(
        cluster: tuple[Processes, dict[str, str]], tmp_path: Path) -> None:
    facts, tasks = completed("spread", cluster[1], tmp_path)
    assert sorted(tasks) == ["branch_1", "branch_2", "branch_3", "branch_4", "plan", "reduce"]
    assert all(t["status"] == "completed" and t["attempts"] == 1 and t["pid"] for t in tasks.values())
    branch_pids = {tasks[f"branch_{i}"]["pid"] for i in range(1, 5)}
    assert len(branch_pids) >= 2, f"every branch ran in one process: {facts['tasks']}"
    assert len({tasks[f"branch_{i}"]["worker"] for i in range(1, 5)}) >= 2  # w1@... and w2@...
    # one request per LLM step: no step ran twice
    assert dict(facts["requests"]) == {"plan:user": 1, "reduce:user": 1,
                                       **{f"branch_{i}:user": 1 for i in range(1, 5)},
                                       **{f"branch_{i}:tool": 1 for i in range(1, 5)}}
    # the reply and the history are those of the same network run in one process
    single = facts["single"]
    assert single["status"] == "completed"
    assert (facts["reply"], facts["messages"], facts["history"]) == (single["reply"], single["messages"],
                                                                      single["history"])
    assert sorted(t["task"] + "_bot" for t in facts["tasks"]) == single["tasks"]
    # every event carries the turn's run id, (run_id, seq) stays unique, each task streams its steps in order
    assert facts["run_ids"] == [facts["turn_run_id"]]
    assert facts["unique_seq"]
    assert facts["kinds"][0] == "run.started" and facts["kinds"][-2:] == ["run.completed", "stream.ended"]
    assert all(kinds == ["step.started", "step.completed"] for kinds in facts["steps"].values())
    # one trace from the client's request across both workers: each job a child of the job that queued it
    trace = facts["trace"]
    assert trace["trace_ids"] == [trace["client"][0]]
    jobs = {name: runs[-1] for name, runs in trace["jobs"].items()}
    assert all(len(runs) == 1 for runs in trace["jobs"].values())
    assert jobs["turn"]["parent"] == trace["client"][1] and jobs["plan"]["parent"] == jobs["turn"]["span_id"]
    assert {jobs[f"branch_{i}"]["parent"] for i in range(1, 5)} == {jobs["plan"]["span_id"]}
    assert jobs["reduce"]["parent"] in {jobs[f"branch_{i}"]["span_id"] for i in range(1, 5)}
    assert all(trace["agents"][name] == job["span_id"] for name, job in jobs.items() if name != "turn")
    assert len({job["worker"] for job in jobs.values()}) == 2  # w1@... and w2@...
    # a redelivered message of a completed task does nothing
    assert facts["redelivered"]["skipped"] is True and facts["redelivered"]["status"] == "completed"
    assert facts["after_redelivery"] == facts["before_redelivery"]


def test_a_branch_whose_worker_is_killed_runs_again_alone_replaying_its_completed_steps(
        cluster: tuple[Processes, dict[str, str]], tmp_path: Path) -> None:
    facts, tasks = completed("kill", cluster[1], tmp_path)
    assert facts["reply"] == "All four parts are done."
    assert tasks["branch_2"]["attempts"] == 2 and tasks["branch_2"]["pid"] != facts["killed"]["pid"]
    assert all(t["attempts"] == 1 for name, t in tasks.items() if name != "branch_2")
    requests = dict(facts["requests"])
    assert requests["branch_2:user"] == 1  # its completed first LLM step was replayed, not sent again
    assert requests["branch_2:tool"] == 2  # the answer in flight when its worker died was asked again
    assert all(requests[f"branch_{i}:{role}"] == 1 for i in (1, 3, 4) for role in ("user", "tool"))
    assert requests["plan:user"] == requests["reduce:user"] == 1
    notes = (tmp_path / "notes.txt").read_text().splitlines()
    assert sorted(line.split(" ", 1)[1] for line in notes) == [f"branch_{i}" for i in range(1, 5)]  # tool ran once
    assert facts["kinds"].count("run.completed") == 1 and facts["kinds"][-1] == "stream.ended"
    # the killed job's span stayed without an end; its retry, in the same trace, links to it
    trace = facts["trace"]
    assert trace["trace_ids"] == [trace["client"][0]]
    killed, retry = trace["jobs"]["branch_2"]
    assert (killed["ended"], retry["ended"]) == (False, True)
    assert killed["pid"] == facts["killed"]["pid"] and retry["pid"] != killed["pid"]
    assert retry["links"] == [killed["span_id"]] and retry["parent"] == killed["parent"]
    assert trace["agents"]["branch_2"] == retry["span_id"]


def test_a_task_waiting_on_the_turns_memory_wakes_when_a_task_on_the_other_worker_sets_the_key(
        cluster: tuple[Processes, dict[str, str]], tmp_path: Path) -> None:
    facts, tasks = completed("memory", cluster[1], tmp_path)
    assert facts["reply"] == "Relayed."
    assert tasks["waiter"]["pid"] != tasks["setter"]["pid"]  # the two roots ran on the two workers
    [line] = (tmp_path / "notes.txt").read_text().splitlines()
    pid, _woke, woke, _sent, sent = line.split()
    assert int(pid) == tasks["waiter"]["pid"]
    latency = float(woke) - float(sent)
    print(f"cross-worker memory wake: {latency * 1000:.1f} ms")
    assert 0 <= latency < 0.1


def test_a_task_robots_write_waits_for_approval_across_the_workers_and_runs_once(
        cluster: tuple[Processes, dict[str, str]], tmp_path: Path) -> None:
    """Issue 27: the clerk's write parks its turn (no worker waits); approve runs it once, deny writes nothing."""
    facts = scenario("approval", cluster[1], tmp_path)
    approved, denied = facts["approved"], facts["denied"]
    for turn in (approved, denied):
        assert turn["parked"] == "awaiting" and turn["parked_tasks"] == {"intake": "completed", "clerk": "awaiting"}
        assert turn["question"]["type"] == "approval" and turn["question"]["tool"] == "update_note"
        assert turn["question"]["details"]["changes"] == [
            {"field": "status", "before": "open", "after": "done"},
            {"field": "body", "before": "", "after": "done by the clerk"}]
        assert turn["status"] == "completed", turn["error"]
        assert turn["completed_events"] == 1
        assert turn["tasks"] == {"intake": ["completed", 1], "clerk": ["completed", 1]}
    assert approved["fields"] == ["done", "done by the clerk"]
    assert approved["reply"].startswith("The clerk read: {") and '"status": "done"' in approved["reply"]
    assert approved["effects"] == [["update_note", "completed", 1]]
    assert denied["fields"] == ["open", ""]
    assert denied["reply"] == "The clerk read: denied by alice"
    assert denied["effects"] == [["update_note", "denied", 1]]
    saved = [line.split(" ", 1)[1] for line in (tmp_path / "notes.txt").read_text().splitlines()]
    assert saved == [f"saved {approved['note']} done"]  # one write, by a worker: the approved one
    # each model call once: the parked call was replayed from its checkpoint, not sent again
    assert dict(facts["requests"]) == {"intake:user": 2, "clerk:user": 2, "clerk:tool": 2}
