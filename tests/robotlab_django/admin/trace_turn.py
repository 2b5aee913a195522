"""A distributed 1 -> N -> 1 network turn with its spans, as the app stores them: for the trace's admin tests, the
Chromium check and ``benchmarks/admin_waterfall.py``.

The turn's row (robot ``report``) has a task row per task: ``plan`` (robot ``planner``), ``branch_1`` ..
``branch_N`` (robots ``researcher_1`` ..) and ``reduce`` (robot ``writer``), each with its transcript (a branch asks
its tool ``search`` once) and its spans on its own row, over two workers: the turn's ``job report``, then each
task's ``job {task}`` (a child of the job that queued it: the turn's for the plan, the plan's for the branches,
the last branch's for the reducer) over ``invoke_agent {robot}``, ``chat {model}`` and ``execute_tool search``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from robotlab_django.models import RobotResult, RunSpan, Status, Thread

__all__ = ["T0", "Turn", "make_turn"]

T0 = dt.datetime(2026, 3, 2, 9, 30, tzinfo=dt.UTC)
WORKERS = (("celery@worker-a", 4101), ("celery@worker-b", 4102))


@dataclass
class Turn:
    """The rows made: the turn, its task rows by task name, and every span by ``(task, name)``."""

    row: RobotResult
    tasks: dict[str, RobotResult]
    spans: dict[tuple[str, str], RunSpan] = field(default_factory=dict)


class _Spans:
    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.ids = itertools.count(1)
        self.made: list[RunSpan] = []

    def add(self, row: RobotResult, name: str, start: float, end: float | None, parent: RunSpan | None,
            worker: int, **fields: Any) -> RunSpan:
        operation = name.split(" ")[0]
        attributes = dict(fields.pop("attributes", {}))
        if operation != "job":
            attributes["gen_ai.operation.name"] = operation
        host, pid = WORKERS[worker]
        span = RunSpan(result=row, trace_id=self.trace_id, span_id=f"{next(self.ids):016x}",
                       parent_span_id=parent.span_id if parent else "", name=name,
                       kind=fields.pop("kind", "consumer" if operation == "job" else "internal"),
                       started_at=T0 + dt.timedelta(seconds=start),
                       ended_at=None if end is None else T0 + dt.timedelta(seconds=end),
                       attributes=attributes, worker=host, worker_pid=pid, **fields)
        self.made.append(span)
        return span


def _messages(question: str, tool: str | None, call_id: str, reply: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    if tool is not None:
        messages += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": call_id, "type": "function",
                          "function": {"name": tool, "arguments": '{"query": "' + question[:30] + '"}'}}]},
                     {"role": "tool", "tool_call_id": call_id, "name": tool, "content": "3 results"}]
    return [*messages, {"role": "assistant", "content": reply}]


def make_turn(branches: int = 8, *, robot: str = "researcher", tool: str = "search", session: str = "turn-1",
              model: str = "gpt-4o-mini") -> Turn:
    """A finished 1 -> ``branches`` -> 1 turn and its spans, stored (``robot`` and ``tool`` name every branch's)."""
    thread = Thread.objects.create(session_id=session, robot_name="report")
    turn = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="report", status=Status.COMPLETED,
                                      input="Write the quarterly report", reply="The report is ready.",
                                      model=model, run_id=f"run-{session}", worker=WORKERS[0][0],
                                      worker_pid=WORKERS[0][1])
    names = ["plan", *(f"branch_{n}" for n in range(1, branches + 1)), "reduce"]
    robots = {"plan": "planner", "reduce": "writer",
              **{f"branch_{n}": robot if robot != "researcher" else f"researcher_{n}" for n in range(1, branches + 1)}}
    made = Turn(turn, {})
    for index, name in enumerate(names, 2):
        branch = name.startswith("branch_")
        made.tasks[name] = RobotResult.objects.create(
            thread=thread, sequence_number=index, robot_name=robots[name], status=Status.COMPLETED, parent=turn,
            task_name=name, delegated_by="report", run_id=f"run-{session}.{name}", input=f"Part {name} of the report",
            messages=_messages(f"Part {name} of the report", tool if branch else None, f"call_{name}",
                               f"{name} done."),
            reply=f"{name} done.", model=model, worker=WORKERS[index % 2][0], worker_pid=WORKERS[index % 2][1])
    spans = _Spans(hashlib.sha256(session.encode()).hexdigest()[:32])  # one trace per turn
    root = spans.add(turn, "job report", 0.0, None, None, 0)
    made.spans[("report", "job")] = root

    def task(name: str, start: float, seconds: float, parent: RunSpan, worker: int, cost: str) -> RunSpan:
        row, robot_name = made.tasks[name], robots[name]
        job = spans.add(row, f"job {name}", start, start + seconds, parent, worker)
        agent = spans.add(row, f"invoke_agent {robot_name}", start + 0.02, start + seconds - 0.02, job, worker,
                          attributes={"gen_ai.agent.name": robot_name})
        made.spans.update({(name, "job"): job, (name, "agent"): agent})
        chat = {"kind": "client", "attributes": {"gen_ai.request.model": model}}
        if name.startswith("branch_"):
            first = start + 0.05 + 0.4
            made.spans[(name, "chat 1")] = spans.add(row, f"chat {model}", start + 0.05, first, agent, worker,
                                                     input_tokens=400, output_tokens=30, cost=Decimal("0.0008"),
                                                     **chat)
            ends = start + seconds - 0.5
            made.spans[(name, "tool")] = spans.add(row, f"execute_tool {tool}", first, ends, agent, worker, attributes={
                "gen_ai.tool.name": tool, "gen_ai.tool.call.id": f"call_{name}"})
            made.spans[(name, "chat 2")] = spans.add(row, f"chat {model}", ends, start + seconds - 0.05, agent,
                                                     worker, input_tokens=900, output_tokens=160, cost=Decimal(cost),
                                                     **chat)
        else:
            made.spans[(name, "chat 1")] = spans.add(row, f"chat {model}", start + 0.05, start + seconds - 0.05,
                                                     agent, worker, input_tokens=1200, output_tokens=300,
                                                     cost=Decimal(cost), **chat)
        return job

    plan = task("plan", 0.05, 1.1, root, 0, "0.0021")
    jobs = []
    for n in range(1, branches + 1):
        seconds = 2.2 + 0.35 * (n % 4) + (0.9 if n == 3 and branches >= 3 else 0.0)  # branch 3's search: slowest
        jobs.append(task(f"branch_{n}", 1.2 + 0.03 * n, seconds, plan, n % 2, f"0.00{10 + n}"))
    last = max(jobs, key=lambda job: job.ended_at or T0)  # the reducer is queued by the last branch to finish
    start = ((last.ended_at or T0) - T0).total_seconds() + 0.05
    task("reduce", start, 1.2, last, 1, "0.0062")  # the most expensive call: the writer's
    root.ended_at = T0 + dt.timedelta(seconds=start + 1.25)
    RunSpan.objects.bulk_create(spans.made)
    return made
