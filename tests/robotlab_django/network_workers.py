"""The client side of the distributed network tests: ``python -m tests.robotlab_django.network_workers SCENARIO``.

It runs in its own process next to the Celery workers (test_network_workers.py starts them), with the fake
OpenAI-compatible server the workers' robots talk to (``ROBOTLAB_TEST_LLM_BASE``), and prints one JSON
line of facts:

* ``spread``: one ``fanout`` turn (plan -> 4 branches -> reduce) through the workers; then the message of
  a completed task row is delivered again; then the same network runs in one process on another thread,
  for comparison.
* ``kill``: the same turn, but the pool child running ``branch_2`` is SIGKILLed while that branch waits for
  its second LLM answer (its first call and its tool call completed and were checkpointed).
* ``memory``: a ``relay`` turn: its two roots start together on the two workers; one waits on the turn's
  shared memory (``ROBOTLAB["NETWORK_MEMORY_URL"]``) for the key the other sets (the notes file says when).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections import Counter
from typing import Any

#: Seconds ``branch_2``'s second answer takes in the ``kill`` scenario (the window for the kill).
SLOW = 20.0
#: Seconds every branch answer takes otherwise (so the branches overlap and spread over the workers).
BRANCH_LATENCY = 0.4
WAIT = 90.0


def _task_of(body: dict[str, Any]) -> str:
    system = str(body["messages"][0]["content"])
    return system.removeprefix("You are the ").removesuffix(" robot.")


def main(scenario: str) -> dict[str, Any]:
    """Run ``scenario`` and return its facts."""
    import django

    django.setup()
    from django.conf import settings

    import tests.robotlab_django.celery_app  # noqa: F401  (a project imports its Celery app at startup)
    from robotlab.testing.server import FakeLLMServer, call, reply, slow_first_byte, tool_calls
    from robotlab_django import executor, tasks
    from robotlab_django.chat_history import load_history
    from robotlab_django.models import RobotResult, RunEvent, Status
    from robotlab_django.records import get_thread, start_run
    from robotlab_django.runner import run_robot
    from tests.robotlab_django.faults import wait_for

    in_flight = threading.Event()
    slow_sent: list[str] = []

    def respond(body: dict[str, Any]) -> Any:
        task, last = _task_of(body), body["messages"][-1]
        if task in ("waiter", "setter"):
            tool = "await_signal" if task == "waiter" else "send_signal"
            return reply(f"{task} done.") if last["role"] == "tool" else call(tool)
        if task == "done":
            return reply("Relayed.")
        if task == "plan":
            return reply("Four parts.")
        if task == "reduce":
            return reply("All four parts are done.")
        if last["role"] != "tool":
            return tool_calls(call("note", text=task))
        if scenario == "kill" and task == "branch_2" and not slow_sent:
            slow_sent.append(task)
            in_flight.set()
            return slow_first_byte(SLOW, reply(f"{task} is done."))
        return slow_first_byte(BRANCH_LATENCY, reply(f"{task} is done."))

    port = int(os.environ["ROBOTLAB_TEST_LLM_PORT"])
    with FakeLLMServer(responder=respond, port=port) as server:
        thread = get_thread("distributed")
        row = start_run(thread, "relay" if scenario == "memory" else "fanout", "Split the work")
        executor.dispatch(row)
        killed: dict[str, Any] = {}
        if scenario == "kill":
            if not in_flight.wait(WAIT):
                raise TimeoutError("branch_2 never asked for its answer")
            victim = wait_for(lambda: RobotResult.objects.filter(parent_id=row.pk, task_name="branch_2")
                           .values_list("worker_pid", flat=True).first(), "branch_2's worker pid")
            os.kill(victim, signal.SIGKILL)
            killed = {"pid": victim, "at_requests": len(server.requests)}
        wait_for(lambda: RobotResult.objects.get(pk=row.pk).status in (Status.COMPLETED, Status.FAILED),
              "the turn to finish", timeout=2 * WAIT)
        wait_for(lambda: RunEvent.objects.filter(result_id=row.pk, kind="stream.ended").exists(),
              "the turn's stream.ended (sent right after its row is stored)")
        row.refresh_from_db()
        task_rows = list(RobotResult.objects.filter(parent_id=row.pk).order_by("pk"))
        requests = [(_task_of(body), body["messages"][-1]["role"]) for body in server.requests]
        events = list(RunEvent.objects.filter(thread_id=thread.pk).order_by("pk"))
        facts: dict[str, Any] = {
            "status": str(row.status), "error": row.error, "reply": row.reply, "messages": row.messages,
            "history": load_history(thread.pk),
            "tasks": [{"task": t.task_name, "status": str(t.status), "worker": t.worker, "pid": t.worker_pid,
                       "attempts": t.attempts, "reply": t.reply} for t in task_rows],
            "requests": sorted(Counter(f"{task}:{role}" for task, role in requests).items()),
            "killed": killed,
            "run_ids": sorted({e.run_id for e in events}), "turn_run_id": row.run_id,
            "unique_seq": len({(e.run_id, e.seq) for e in events}) == len(events),
            "kinds": [e.kind for e in events if e.result_id == row.pk],
            "steps": {t.task_name: [e.kind for e in events if e.result_id == t.pk and e.kind.startswith("step.")]
                      for t in task_rows},
        }
        if scenario == "spread":
            done = next(t for t in task_rows if t.status == Status.COMPLETED)
            before = (len(server.requests), RobotResult.objects.get(pk=row.pk).turn_version)
            again = tasks.run_robot.apply_async(args=(done.pk,), queue=settings.ROBOTLAB.get("TASK_QUEUE",
                                                                                             "default"))
            facts["redelivered"] = again.get(timeout=WAIT)
            facts["after_redelivery"] = [len(server.requests), RobotResult.objects.get(pk=row.pk).turn_version]
            facts["before_redelivery"] = list(before)
            settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": False}
            single = run_robot("one-process", "fanout", "Split the work")
            facts["single"] = {"status": str(single.status), "reply": single.reply, "messages": single.messages,
                               "history": load_history(single.thread_id),
                               "tasks": sorted(RobotResult.objects.filter(delegated_by="fanout",
                                                                          thread_id=single.thread_id)
                                               .values_list("robot_name", flat=True))}
    return facts


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), default=str))
