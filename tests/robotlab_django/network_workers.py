"""The client side of the distributed network tests: ``python -m tests.robotlab_django.network_workers SCENARIO``.

It runs in its own process next to the Celery workers (test_network_workers.py starts them), with the fake
OpenAI-compatible server the workers' robots talk to (``ROBOTLAB_TEST_LLM_BASE``), and prints one JSON
line of facts:

* ``spread``: one ``fanout`` turn (plan -> 4 branches -> reduce) through the workers; then the message of
  a completed task row is delivered again; then the same network runs in one process on another thread,
  for comparison.
* ``kill``: the same turn, but the pool child running ``branch_2`` is SIGKILLed while that branch waits for
  its second LLM answer (its first call and its tool call completed and were checkpointed).
* with ``ROBOTLAB_TEST_TRACES=1`` (the workers keep their spans), the turn is queued inside a span of this process,
  and the facts say what the workers stored (``trace``): one trace, each row's jobs and their links.
* ``memory``: a ``relay`` turn: its two roots start together on the two workers; one waits on the turn's
  shared memory (``ROBOTLAB["NETWORK_MEMORY_URL"]``) for the key the other sets (the notes file says when).
* ``approval``: two ``notesnet`` turns (``intake`` -> ``clerk``, :mod:`tests.robotlab_django.notes_network`) for
  alice, each parked on the clerk's ``update_note`` call waiting for approval; the first is approved, the second
  denied, each from this process while the workers wait for nothing (:func:`approval`).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
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
    if scenario == "approval":
        return approval()
    from django.conf import settings

    import tests.robotlab_django.celery_app  # noqa: F401  (a project imports its Celery app at startup)
    from robotlab.testing.server import FakeLLMServer, call, reply, slow_first_byte, tool_calls
    from robotlab_django import tasks
    from robotlab_django.models import RobotResult, RunEvent, Status
    from robotlab_django.runs import executor
    from robotlab_django.runs.history import load_history
    from robotlab_django.runs.records import get_thread, start_run
    from robotlab_django.runs.runner import run_robot
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
        with _client_span() as client:  # the request that queued the turn: the jobs continue its trace
            executor.dispatch(row)
        killed: dict[str, Any] = {}
        if scenario == "kill":
            if not in_flight.wait(WAIT):
                raise TimeoutError("branch_2 never asked for its answer")
            victim = wait_for(lambda: RobotResult.objects.filter(parent_id=row.pk, task_name="branch_2")
                           .values_list("worker_pid", flat=True).first(), "branch_2's worker pid")
            if os.environ.get("ROBOTLAB_TEST_TRACES"):  # what the victim finished before is stored, as it would be
                wait_for(lambda: _finished_jobs_stored(victim, row.pk), "the spans of the victim's earlier jobs")
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
        facts["trace"] = _trace(row, client)
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


def approval() -> dict[str, Any]:
    """The ``approval`` scenario: a turn approved and a turn denied, each parked on the clerk's write."""
    import re

    from django.contrib.auth.models import Permission, User

    import tests.robotlab_django.celery_app  # noqa: F401  (a project imports its Celery app at startup)
    from robotlab.testing.server import FakeLLMServer, call, reply, tool_calls
    from robotlab_django.models import RobotResult, RunEvent, ToolEffect
    from robotlab_django.runs import control, executor
    from robotlab_django.runs.records import get_thread, start_run
    from tests.robotlab_django.faults import wait_for
    from tests.robotlab_django.notesapp.models import Note

    def respond(body: dict[str, Any]) -> Any:
        task, last = _task_of(body), body["messages"][-1]
        if task == "intake":
            return reply(f"note {re.findall(r'[0-9]+', str(last['content']))[0]}")
        if last["role"] == "tool":
            return reply(f"The clerk read: {last['content']}")
        pk = int(re.findall(r"[0-9]+", str(last["content"]))[0])
        arguments = {"id": pk, "status": "done", "body": "done by the clerk"}  # id= names the call itself
        return tool_calls(call("update_note", raw_arguments=json.dumps(arguments)))

    alice = User.objects.create_user("alice", password="pw")
    alice.user_permissions.add(Permission.objects.get(codename="change_note", content_type__app_label="notesapp"))

    def status(pk: int) -> str:
        return str(RobotResult.objects.get(pk=pk).status)

    def turn(title: str, approved: bool) -> dict[str, Any]:
        note = Note.objects.create(owner=alice, title=title)
        row = start_run(get_thread(None, user=alice), "notesnet", f"Close note {note.pk}")
        executor.dispatch(row)
        wait_for(lambda: status(row.pk) in {"awaiting", "failed"}, "the turn to park on its approval", timeout=WAIT)
        parked = RobotResult.objects.get(pk=row.pk)
        tasks = {t.task_name: str(t.status) for t in RobotResult.objects.filter(parent_id=row.pk)}
        control.decide(parked, approved, alice, request_id=(parked.question or {}).get("request_id"))
        wait_for(lambda: status(row.pk) in {"completed", "failed"}, "the decided turn to finish", timeout=WAIT)
        wait_for(lambda: RunEvent.objects.filter(result_id=row.pk, kind="stream.ended").exists(),
                 "the turn's stream.ended")
        done = RobotResult.objects.get(pk=row.pk)
        note.refresh_from_db()
        kinds = list(RunEvent.objects.filter(result_id=row.pk).order_by("pk").values_list("kind", flat=True))
        return {"note": note.pk, "parked": str(parked.status), "question": parked.question, "parked_tasks": tasks,
                "status": str(done.status), "error": done.error, "reply": done.reply,
                "fields": [note.status, note.body], "completed_events": kinds.count("run.completed"),
                "tasks": {t.task_name: [str(t.status), t.attempts] for t in RobotResult.objects.filter(
                    parent_id=row.pk)},
                "effects": [[e.tool_name, str(e.status), e.attempts] for e in ToolEffect.objects.filter(
                    run_id=done.run_id)]}

    port = int(os.environ["ROBOTLAB_TEST_LLM_PORT"])
    with FakeLLMServer(responder=respond, port=port) as server:
        facts = {"approved": turn("buy milk", True), "denied": turn("call mom", False)}
        requests = [(_task_of(body), body["messages"][-1]["role"]) for body in server.requests]
        facts["requests"] = sorted(Counter(f"{task}:{role}" for task, role in requests).items())
    return facts


@contextmanager
def _client_span() -> Iterator[Any]:
    """A span of this process around the dispatch (with ``ROBOTLAB["TRACES"]`` on), else ``None``."""
    from robotlab_django.tracing.runs import keeping

    if keeping() is None:  # sets the app's SDK tracer provider here, as it would at this process's first run
        yield None
        return
    from opentelemetry import trace

    with trace.get_tracer("tests").start_as_current_span("client") as span:
        yield span


def _finished_jobs_stored(pid: int, turn_pk: int) -> bool:
    """Whether the jobs process ``pid`` ran before its current one have their spans stored, ended.

    A batch span processor writes every few milliseconds (``OTEL_BSP_SCHEDULE_DELAY``): what it holds when its
    process is SIGKILLed is lost, so the kill waits for the batch that holds the turn's first jobs.
    """
    from robotlab_django.models import RobotResult, RunSpan

    current = RobotResult.objects.filter(parent_id=turn_pk, worker_pid=pid, status="running").values_list("pk")
    jobs = RunSpan.objects.filter(worker_pid=pid, kind="consumer").exclude(result_id__in=current)
    return jobs.exists() and not jobs.filter(ended_at__isnull=True).exists()


def _trace(turn: Any, client: Any) -> dict[str, Any]:
    """The spans the workers stored for the turn's rows (once written): trace ids, each row's jobs, the robots'."""
    if client is None:
        return {}
    from robotlab_django.models import RobotResult, RunSpan
    from tests.robotlab_django.faults import wait_for

    names = {turn.pk: "turn", **dict(RobotResult.objects.filter(parent_id=turn.pk).values_list("pk", "task_name"))}

    def written() -> bool:  # every row's last job ended, and every task's robot run is stored
        jobs = RunSpan.objects.filter(result_id__in=names, kind="consumer").order_by("result_id", "started_at")
        last = {span.result_id: span for span in jobs}
        agents = RunSpan.objects.filter(result_id__in=names, name__startswith="invoke_agent ").count()
        return len(last) == len(names) and all(s.ended_at for s in last.values()) and agents >= len(names) - 1

    wait_for(written, "the workers' spans to be written")
    spans = list(RunSpan.objects.filter(result_id__in=names).order_by("started_at", "pk"))
    context = client.get_span_context()
    return {
        "client": [f"{context.trace_id:032x}", f"{context.span_id:016x}"],
        "trace_ids": sorted({s.trace_id for s in spans}),
        "jobs": {names[s.result_id]: [{"span_id": j.span_id, "parent": j.parent_span_id, "ended": bool(j.ended_at),
                                       "links": [link["span_id"] for link in j.links], "worker": j.worker,
                                       "pid": j.worker_pid} for j in spans
                                      if j.result_id == s.result_id and j.kind == "consumer"]
                 for s in spans},
        "agents": {names[s.result_id]: s.parent_span_id for s in spans if s.name.startswith("invoke_agent ")
                   and s.ended_at},
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), default=str))
