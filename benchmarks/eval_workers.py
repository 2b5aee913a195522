"""Issue 30's eval figure: ``manage.py robotlab_eval`` over 100 cases with 4 Celery worker processes against 1.

The ``echo`` robot of the tests answers each case with one model call to a fake OpenAI-compatible server in its
own process (``FakeLLMServerProcess``, RobotLab's default transport), every call answered after ``--latency``
seconds (200 ms by default, a provider's pace, so that the model calls rather than the cores bound the eval; on
a 2-core machine a job's own CPU still shows at that pace, see ``busy``, and ``--latency 1`` leaves it aside).
The set has ``--cases`` cases (every tenth expects another reply, so it fails: the score is 0.9), loaded from YAML
by the command itself (``--load``).

For each worker count (``--counts``, 1 and 4 by default) it starts a real Celery worker (``--pool=prefork -c <n>``:
n worker processes, the tests' Celery app, Redis database 15 as broker, the run's own queue and key prefix), runs
``manage.py robotlab_eval echo --load <set.yaml> --concurrency <c> --threshold 0.85`` as a subprocess
(``EXECUTOR = "celery"``: each case is a Celery job, ``--concurrency`` cases in flight, the same for every count)
and, with the worker still up, once more on a 10-case set with ``--concurrency 1`` and ``--threshold 0.95`` (over
the score, so its exit status must be 3), then stops the worker. It prints each count's wall (the command's
process, start to exit), the eval's own duration (``EvalRun.duration``), the ratio of each wall to the one-worker
wall, the score, how many worker processes ran a case, the exit statuses, how busy the machine's cores were over
the eval (near 100 %: the cores, not the model calls, bound it), the most case runs in flight at once (their
rows' start and finish: at most the worker processes, and 1 in the ``--concurrency 1`` run) and the CPU seconds
the command's own process used (queueing the cases, waiting on their rows, scoring and storing them).

The last line reads ``eval_workers: cases=<n> 1w=<s> 4w=<s> ratio=<x> exit=<rc> under_threshold_exit=<rc>``
(the ratio: the largest count's wall over the one-worker wall; issue 30 asks about 0.25).

    .venv/bin/python benchmarks/eval_workers.py [--cases 100] [--latency 0.2] [--counts 1,4] [--concurrency 8]
        [--db postgres] [--json] [--logs DIR]

Redis must answer on 127.0.0.1:6379 (nothing is flushed: the queue and keys carry this run's id).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

READY_TIMEOUT = 120.0
#: Seconds a worker is left alone once it says it is ready, so its pool children have started (and warmed up).
SETTLE = 3.0
REPLY = "Hello there"
#: The command's exit status under ``--threshold`` (robotlab_django/management/commands/robotlab_eval.py).
UNDER_THRESHOLD = 3
#: ``manage.py`` of the tests' project: like a project's package ``__init__``, it imports the Celery app first
#: (without it, Celery's default app would send the cases to an AMQP broker nobody runs).
MANAGE = ("import sys, tests.robotlab_django.celery_app; from django.core.management import "
          "execute_from_command_line; execute_from_command_line(['manage.py', *sys.argv[1:]])")


def cases_yaml(name: str, count: int) -> str:
    """An eval set of ``count`` cases; every tenth expects another reply than the fake server's."""
    lines = [f"set: {name}", "cases:"]
    for index in range(count):
        reference = "Goodbye" if index % 10 == 9 else REPLY
        lines += [f"  - name: case-{index:03d}", f"    input: Case {index}", f"    reference: {reference}"]
    return "\n".join(lines) + "\n"


def environment(workdir: Path, api_base: str, db: str) -> tuple[dict[str, str], Any]:
    """The environment of the workers and the command (and of this process), and a function dropping the database."""
    os.environ["ROBOTLAB_TEST_DB"] = db
    # this run's queue and Redis key prefix (tests/robotlab_django/settings.py reads it), shared with the workers
    os.environ.setdefault("ROBOTLAB_TEST_RUN_ID", f"evalw{uuid.uuid4().hex[:8]}")
    from tests.robotlab_django.faults import database_env

    database, drop = database_env(workdir)
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, **database, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "PYTHONPATH": path, "ROBOTLAB_TEST_EXECUTOR": "celery",
           "ROBOTLAB_TEST_LLM": "tests.robotlab_django.server_llm.fake_server_llm",
           "ROBOTLAB_TEST_FAKE_API_BASE": api_base, "ROBOT_LAB_MODEL": "openai/gpt-4o-mini",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return env, drop


def start_worker(workdir: Path, env: dict[str, str], queue: str, processes: int) -> subprocess.Popen[bytes]:
    """A prefork worker with ``processes`` children on ``queue``, once it logged that it is ready."""
    log_path = workdir / f"worker{processes}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker", "--pool=prefork",
             "-c", str(processes), "-Q", queue, "-n", f"evalbench{processes}@%h", "-l", "info",
             "--without-heartbeat", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + READY_TIMEOUT
    while b" ready." not in log_path.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"the worker did not start:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.05)
    time.sleep(SETTLE)
    return process


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group, SIGKILL it after 15 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)


def machine_ticks() -> tuple[int, int]:
    """This machine's busy and total CPU ticks so far, over every core (``/proc/stat``)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def most_in_flight(eval_run: Any) -> int:
    """The most case runs that were running at once (their rows' ``started_at`` to ``finished_at``)."""
    events = []
    for started, finished in eval_run.results.values_list("result__started_at", "result__finished_at"):
        if started is not None and finished is not None:
            events += [(started, 1), (finished, -1)]
    running = most = 0
    for _at, step in sorted(events):  # at a tie, an end (-1) sorts before a start
        running += step
        most = max(most, running)
    return most


def run_command(env: dict[str, str], path: Path, concurrency: int, threshold: float) -> dict[str, Any]:
    """Run ``robotlab_eval`` on the set in ``path``: its wall, exit status, eval run and summary line."""
    busy, total = machine_ticks()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command is the only child reaped meanwhile
    started = time.perf_counter()
    process = subprocess.run(
        [sys.executable, "-c", MANAGE, "robotlab_eval", "echo", "--load", str(path), "--concurrency",
         str(concurrency), "--threshold", str(threshold), "--timeout", "120"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - started
    busy_after, total_after = machine_ticks()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    command_cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    run = re.search(r"^Eval run (\d+):", process.stdout, re.M)
    totals = re.search(r"^(\d+)/(\d+) passed, score (\S+),", process.stdout, re.M)
    if run is None or totals is None:
        raise RuntimeError(f"robotlab_eval failed ({process.returncode}):\n{process.stdout[-2000:]}"
                           f"\n{process.stderr[-3000:]}")
    from robotlab_django.models import EvalRun

    eval_run = EvalRun.objects.get(pk=int(run.group(1)))
    return {"wall": wall, "duration": eval_run.duration, "exit": process.returncode, "passed": int(totals.group(1)),
            "machine_busy": (busy_after - busy) / max(1, total_after - total), "command_cpu": command_cpu,
            "cases": int(totals.group(2)), "score": float(totals.group(3)),
            "workers": eval_run.results.values("result__worker", "result__worker_pid").distinct().count(),
            "in_flight": most_in_flight(eval_run)}


def measure(count: int, env: dict[str, str], workdir: Path, sets: dict[str, Path],
            concurrency: int) -> dict[str, Any]:
    """The figures of one worker count (and, for the largest, the under-threshold run)."""
    from tests.robotlab_django.settings import TASK_QUEUE

    worker = start_worker(workdir, env, TASK_QUEUE, count)
    try:
        figures = run_command(env, sets["main"], concurrency, 0.85)
        small = run_command(env, sets["small"], 1, 0.95)  # one case at a time, whatever the workers
        figures.update(under=small["exit"], under_in_flight=small["in_flight"])
    finally:
        stop(worker)
    return {"processes": count, **figures}


def main() -> None:
    """Run the eval with each worker count and print the walls side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the fake server takes per call")
    parser.add_argument("--counts", default="1,4", help="worker processes, comma-separated")
    parser.add_argument("--concurrency", type=int, default=8, help="robotlab_eval --concurrency (cases in flight)")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--logs", help="keep the workers' logs (and a SQLite database) in this folder")
    args = parser.parse_args()
    from robotlab.testing.server import FakeLLMServerProcess

    results = []
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServerProcess(default=REPLY, latency=args.latency) as server:
        workdir = Path(args.logs or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        env, drop = environment(workdir, server.base_url, args.db)
        sets = {"main": workdir / "bench.yaml", "small": workdir / "small.yaml"}
        sets["main"].write_text(cases_yaml("bench", args.cases), encoding="utf-8")
        sets["small"].write_text(cases_yaml("bench-small", 10), encoding="utf-8")
        try:
            os.environ.update(env)
            subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                           timeout=300)
            import django

            django.setup()
            for count in (int(c) for c in args.counts.split(",")):
                results.append(measure(count, env, workdir, sets, args.concurrency))
        finally:
            from django.db import connections

            connections.close_all()
            drop()
    base, last = results[0], results[-1]
    ratio = last["wall"] / base["wall"]
    if args.json:
        print(json.dumps({"results": results, "ratio": ratio, "cases": args.cases, "latency": args.latency,
                          "concurrency": args.concurrency}, indent=2))
        return
    print(f"robotlab_eval over {args.cases} cases, {args.latency * 1000:.0f} ms a model call, --concurrency "
          f"{args.concurrency}, {args.db}, {os.cpu_count()} cores")
    print(f"  {'workers':>7} {'wall s':>7} {'eval s':>7} {'ratio':>6} {'score':>6} {'passed':>7} {'ran on':>7} "
          f"{'exit':>5} {'exit@0.95':>9} {'busy':>6} {'in flight':>9}")
    for r in results:
        print(f"  {r['processes']:7d} {r['wall']:7.2f} {r['duration']:7.2f} {r['wall'] / base['wall']:6.2f} "
              f"{r['score']:6.3f} {r['passed']:3d}/{r['cases']:<3d} {r['workers']:7d} {r['exit']:5d} "
              f"{r['under']:9d} {r['machine_busy']:6.0%} {r['in_flight']:9d} {r['command_cpu']:7.2f}")
    print(f"target: {last['processes']} workers in about 1/{last['processes']} of one's wall: "
          f"{ratio:.2f} (ideal {1 / last['processes']:.2f}); exit 0 at --threshold 0.85, "
          f"{UNDER_THRESHOLD} at 0.95")
    print(f"eval_workers: cases={args.cases} 1w={base['wall']:.2f} {last['processes']}w={last['wall']:.2f} "
          f"ratio={ratio:.2f} exit={last['exit']} under_threshold_exit={last['under']}")


if __name__ == "__main__":
    main()
