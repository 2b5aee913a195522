"""A parked run across worker processes, run as a driver process by test_park_worker.py.

``python -m tests.robotlab_django.park_worker --workdir DIR`` sets Django up against a database file
every process shares, starts a fake OpenAI-compatible server (here, so it counts every request) and a
Celery worker (broker: Redis database 9). The ``planner`` robot's first LLM call asks the user
(``AskUser`` with two choices): the run parks ``awaiting`` and the worker is released. The driver stops
that worker process, starts a new one, answers ``"2"``, and waits for the run to complete; it prints
what it saw as one JSON line: the requests the server got before and after the answer, the answer the
model was given, the run's status, reply and attempts, and the worker pids.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.robotlab_django.faults import Processes, database_env, wait_for

#: The broker of this test (the other worker tests use 13, 14 and 15).
REDIS_URL = "redis://127.0.0.1:6379/9"
LLM_BASE_ENV = "ROBOTLAB_PARK_LLM_BASE"


def server_llm() -> Any:
    """``ROBOTLAB["LLM"]``: litellm against the driver's fake server, without retries (a request is a call)."""
    from robotlab.llm import LLMClient

    return LLMClient(api_base=os.environ[LLM_BASE_ENV], api_key="sk-fake", num_retries=0)


def build_planner(**options: Any) -> Any:
    """The robot that asks its user which plan (``ROBOTLAB["ROBOTS"]["planner"]``)."""
    import robotlab

    return robotlab.build(name="planner", system_prompt="You pick plans.", local_tools=[robotlab.AskUser],
                          **options)


def _status(pk: int) -> str:
    from robotlab_django.models import RobotResult

    return str(RobotResult.objects.get(pk=pk).status)


def _outcomes(log: Path) -> list[str]:
    """The statuses the worker's tasks returned, and any lost worker, from its log."""
    text = log.read_text(errors="replace")
    return re.findall(r"'status': '(\w+)'", text) + (["lost"] if "WorkerLostError" in text else [])


def _worker(processes: Processes, queue: str, name: str) -> Any:
    """A Celery worker of this test's app with one prefork child on ``queue``."""
    return processes.start(name, [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.park_celery", "worker",
                                  "--pool=prefork", "-c", "1", "-Q", queue, "-l", "info", "--without-heartbeat",
                                  "--without-gossip", "--without-mingle"])


def scenario(processes: Processes, server: Any) -> dict[str, Any]:
    """Park a run on one worker, stop it, answer with another worker running; report what happened."""
    from django.conf import settings

    import tests.robotlab_django.park_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab.testing.server import call, reply, tool_calls
    from robotlab_django import services
    from robotlab_django.models import RobotResult, RunEvent, RunStep
    from robotlab_django.runs import control, executor
    from tests.robotlab_django.faults import _setup

    def respond(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return reply(f"You are on the {last['content']} plan.")
        return tool_calls(call("robot_lab--ask_user", question="Which plan?", choices=["basic", "pro"]))

    server.responder = respond
    user, _session = _setup()
    queue = f"robotlab-park-{uuid.uuid4().hex[:8]}"
    settings.ROBOTLAB = {**settings.ROBOTLAB, "TASK_QUEUE": queue}  # where the answer queues the run again
    row = services.start_run(services.get_thread(None, user=user), "planner", "Sign me up")
    executor.enqueue(row, queue=queue)  # autocommit: sent at once
    first = _worker(processes, queue, "worker-1")
    wait_for(lambda: _status(row.pk) in {"awaiting", "failed"}, "the run to park on its question")
    parked = RobotResult.objects.get(pk=row.pk)
    os.kill(first.pid, signal.SIGTERM)  # stop the worker (a warm shutdown: its task had returned, parked)
    first.wait(60)
    before = len(server.requests)
    second = _worker(processes, queue, "worker-2")
    control.answer(parked, "2", user)
    wait_for(lambda: _status(row.pk) in {"completed", "failed"}, "the answered run to finish", timeout=120)
    # the row is saved before the task returns: its outcome reaches the worker's log a moment later
    wait_for(lambda: _outcomes(processes.workdir / "worker-2.log"), "the second worker to log its task's outcome")
    done = RobotResult.objects.get(pk=row.pk)
    bodies = server.requests
    kinds = list(RunEvent.objects.filter(result_id=row.pk).order_by("pk").values_list("kind", flat=True))
    return {"parked_status": str(parked.status), "question": parked.question,
            "first_worker_exit": first.returncode, "second_worker_alive": second.poll() is None,
            "requests_before_answer": before, "requests": len(bodies),
            "asks_sent": sum(body["messages"][-1]["role"] != "tool" for body in bodies),
            "answer_given": bodies[-1]["messages"][-1]["content"] if bodies else None,
            "status": str(done.status), "reply": done.reply, "error": done.error, "attempts": done.attempts,
            "first_worker_log": _outcomes(processes.workdir / "worker-1.log"),
            "second_worker_log": _outcomes(processes.workdir / "worker-2.log"),
            "steps": list(RunStep.objects.filter(result_id=row.pk).order_by("idx").values_list("idx", "kind")),
            "completed_events": kinds.count("run.completed"), "kinds": kinds}


def main() -> int:
    """Run the scenario and print its facts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    from robotlab.testing.server import FakeLLMServer

    server = FakeLLMServer().start()
    os.environ.update({LLM_BASE_ENV: server.base_url,
                       "ROBOTLAB_TEST_LLM": "tests.robotlab_django.park_worker.server_llm",
                       "ROBOT_LAB_MODEL": "openai/gpt-4o-mini", "ROBOTLAB_TEST_REDIS_URL": REDIS_URL,
                       "ROBOTLAB_TEST_EXECUTOR": "celery"})
    database, drop = database_env(args.workdir)
    os.environ.update(database)
    import django

    django.setup()
    processes = Processes(args.workdir, dict(os.environ))
    try:
        facts = scenario(processes, server)
    finally:
        processes.stop_all()
        server.stop()
        drop()
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
