"""What each job of a distributed network turn costs: database queries and CPU, per kind of job.

``benchmarks/network_distributed.py`` times turns across worker processes; this one explains their CPU. It runs
``fanout`` turns (plan -> 8 branches -> reduce, as there) in this one process, job by job, as workers would
take them: the executor's dispatch is replaced by a queue that this script empties, each row through
:func:`robotlab_django.runs.runner.deliver` (what the Celery task calls). A job is named by what it ran:
``turn`` (the turn's start), then each task it finished, joined by ``+`` (with ``ROBOTLAB["NETWORK_INLINE_TASKS"]``
on, the default, the turn's job runs the plan, ``turn+plan``, and the job of the branch that finishes last runs the
reducer, ``branch+reduce``; ``--no-inline`` sends every task). For each kind it prints the jobs per turn, the
queries and the CPU per job (and that CPU besides the job's model calls: the loop thread's CPU while a call is
awaited counts as the call's), then the totals per turn. The fake OpenAI-compatible server answers at once, in a
child process.

    .venv/bin/python benchmarks/network_jobs.py [--turns 10] [--db postgres] [--llm server] [--no-inline] [--json]

Queries are counted on the job thread's connection (a checkpoint's write from the event loop's thread is not).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
WARMUP = 2


def _finished(turn: Any) -> set[str]:
    """The task names of ``turn`` whose rows have ended (its own row as ``turn``, once it has a state)."""
    from robotlab_django.models import RobotResult

    rows = RobotResult.objects.filter(parent_id=turn).exclude(status__in=("queued", "running", "retrying"))
    return {name.split("_")[0] for name in rows.values_list("task_name", flat=True)}


def run_turns(turns: int, inline: bool = True) -> dict[str, dict[str, float]]:
    """Run ``WARMUP + turns`` turns job by job; ``{kind: {"jobs", "queries", "cpu_ms"}}`` per turn, measured."""
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from network_distributed import dispatch_turn

    from robotlab_django.models import RobotResult
    from robotlab_django.runs import executor, runner

    settings.ROBOTLAB["DISTRIBUTED_NETWORKS"] = True
    settings.ROBOTLAB["NETWORK_INLINE_TASKS"] = inline
    pending: collections.deque[Any] = collections.deque()
    executor.dispatch = lambda result, queue=None: pending.append(getattr(result, "pk", result))  # type: ignore[assignment]
    model = _time_model_calls()
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0, 0.0, 0.0])
    for index in range(WARMUP + turns):
        turn = dispatch_turn()
        while pending:
            pk = pending.popleft()
            own = (RobotResult.objects.values_list("task_name", flat=True).get(pk=pk) or "turn").split("_")[0]
            before = _finished(turn.pk)
            started, model[0] = time.process_time(), 0.0
            with CaptureQueriesContext(connection) as queries:
                runner.deliver(pk)
            cpu = time.process_time() - started
            ran = sorted(_finished(turn.pk) - before - {own}, key=["plan", "branch", "reduce"].index)
            kind = "+".join([own, *ran])
            if index >= WARMUP:
                total = totals[kind]
                total[0] += 1
                total[1] += len(queries)
                total[2] += cpu
                total[3] += model[0]
        status = RobotResult.objects.values_list("status", flat=True).get(pk=turn.pk)
        if status != "completed":
            raise RuntimeError(f"turn {turn.pk} ended {status}")
    return {kind: {"jobs": jobs / turns, "queries": queries / jobs, "cpu_ms": cpu / jobs * 1000,
                   "model_ms": calls / jobs * 1000, "besides_model_ms": (cpu - calls) / jobs * 1000}
            for kind, (jobs, queries, cpu, calls) in totals.items()}


def _time_model_calls() -> list[float]:
    """Count the CPU of the robots' model calls (``complete`` of every LLM class the benchmark's robots use).

    The loop's thread CPU while a call is awaited: its request, the streamed reply and its parsing, and what the
    loop does for the same job meanwhile (little: the jobs run one at a time). ``[seconds]`` since last reset.
    """
    from robotlab.llm import AutoLLM, LLMClient, OpenAICompatibleLLM

    spent = [0.0]
    for cls in (AutoLLM, LLMClient, OpenAICompatibleLLM):
        original = cls.complete

        async def timed(self: Any, request: Any, *, _original: Any = original, **options: Any) -> Any:
            began = time.thread_time()
            try:
                return await _original(self, request, **options)
            finally:
                spent[0] += time.thread_time() - began

        cls.complete = timed  # type: ignore[method-assign]
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--llm", choices=("auto", "server", "direct"), default="auto",
                        help="as in benchmarks/network_distributed.py")
    parser.add_argument("--no-inline", action="store_true",
                        help="ROBOTLAB['NETWORK_INLINE_TASKS'] off: every task is its own job")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = parser.parse_args()
    from network_distributed import environment

    from robotlab.testing.server import FakeLLMServerProcess, reply

    with tempfile.TemporaryDirectory() as tmp, FakeLLMServerProcess(default=reply("Done.")) as server:
        env, drop = environment(Path(tmp), server.base_url, "redis://127.0.0.1:6379/10", args.db, args.llm)
        env["ROBOTLAB_TEST_EXECUTOR"] = "sync"
        try:
            os.environ.update(env)
            subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                           timeout=300)
            import django

            django.setup()
            kinds = run_turns(args.turns, inline=not args.no_inline)
        finally:
            from django.db import connections

            connections.close_all()
            drop()
    per_turn = {"queries": sum(k["jobs"] * k["queries"] for k in kinds.values()),
                "cpu_ms": sum(k["jobs"] * k["cpu_ms"] for k in kinds.values()),
                "besides_model_ms": sum(k["jobs"] * k["besides_model_ms"] for k in kinds.values())}
    if args.json:
        print(json.dumps({"db": args.db, "llm": args.llm, "inline": not args.no_inline, "turns": args.turns,
                          "jobs": kinds, "per_turn": per_turn}))
        return
    for kind, figures in kinds.items():
        print(f"{kind:14} {figures['jobs']:.0f} job(s) a turn: {figures['queries']:.1f} queries, "
              f"{figures['cpu_ms']:.1f} ms CPU a job ({figures['besides_model_ms']:.1f} ms besides its model calls)")
    print(f"network jobs: {per_turn['queries']:.0f} queries, {per_turn['cpu_ms']:.0f} ms CPU a turn "
          f"({per_turn['besides_model_ms']:.0f} ms besides the model calls; {args.db}, --llm {args.llm})")


if __name__ == "__main__":
    main()
