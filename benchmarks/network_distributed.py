"""A network turn across Celery workers: one turn's wall against its critical path, and turns per second.

The ``fanout`` network of the tests (tests/robotlab_django/fanout.py) with 8 branches: plan -> 8 branches
-> reduce, every branch and the planner answered after L = 200 ms by the fake OpenAI-compatible server (in
a child process, as a real provider is another machine). The reducer joins the branch results without a
model call (``ROBOTLAB_TEST_REDUCER=instant``: a ``FakeLLM``), so the critical path is plan -> branch,
2 L = 400 ms, the figure the spec's B3 states (B3 as ``benchmarks/network.py`` runs it has an LLM reducer,
hence 3 L = 600 ms there). The robots call the server through RobotLab's default transport (``AutoLLM``,
what ``ROBOTLAB["API_BASE"]`` gives an app: the direct client for this OpenAI-compatible server);
``--llm server`` forces litellm (``LLMClient``) and ``--llm direct`` uses one ``robotlab.OpenAICompatibleLLM``
per process, to show how much of a job's CPU is litellm's.

For 1, 2 and 4 worker processes (``celery worker --pool=threads -c 16``: the jobs are I/O bound), it
runs ``ROBOTLAB["DISTRIBUTED_NETWORKS"]`` turns through ``EXECUTOR = "celery"`` and prints:

* ``wall``: a single turn, from dispatch to its row finished (median of ``--runs``),
* ``critical``: 3 L, and ``wall/critical``,
* ``workers``: how many distinct worker processes ran a branch of that turn,
* ``turns/s``: 20 turns dispatched at once, divided by the time until the last one finished,
* ``worker CPU``: the worker processes' CPU time over those turns, per turn (its start, plan, the branches and
  reduce: 9 jobs, as the turn's job runs the plan and the last branch's the reducer, with
  ``ROBOTLAB["NETWORK_INLINE_TASKS"]``): on this 2-core machine a turn's wall cannot fall below that CPU spread
  over the cores,
* ``machine busy``: how busy every core of the machine was over those turns (workers, database, Redis, the fake
  server and this script): near 100 %, more worker processes cannot add throughput.

The broker, result backend and channel layer are Redis database 10 (``--redis-url``); the database is a
fresh PostgreSQL database on 127.0.0.1:5432 (dropped after) with ``--db postgres``, else a SQLite file.
The last line reads ``distributed: workers=<n> wall/critical=<ratio> turns/s 1w=<a> 2w=<b> 4w=<c>``
(``n`` and the ratio for the largest worker count).

    .venv/bin/python benchmarks/network_distributed.py [--runs 3] [--latency 0.2] [--concurrent 20]
        [--db postgres] [--llm server]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BRANCHES = 8
FINISHED = ("completed", "failed")


def environment(workdir: Path, server_url: str, redis_url: str, db: str, llm: str) -> tuple[dict[str, str], Any]:
    """The environment of the workers and of this process, and a function that drops the database."""
    os.environ["ROBOTLAB_TEST_DB"] = db
    # the run's names on Redis, shared with the workers: tests/robotlab_django/settings.py reads it when Django
    # loads it, after this process's environment is complete (importing it here would freeze NETWORKS empty)
    os.environ.setdefault("ROBOTLAB_TEST_RUN_ID", uuid.uuid4().hex[:10])
    from tests.robotlab_django.faults import database_env

    database, drop = database_env(workdir)
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, **database, "PYTHONPATH": path, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "ROBOTLAB_TEST_REDIS_URL": redis_url, "ROBOTLAB_TEST_EXECUTOR": "celery",
           "ROBOTLAB_TEST_NETWORKS": json.dumps({"fanout": "tests.robotlab_django.fanout.fanout_network"}),
           "ROBOTLAB_TEST_FANOUT": str(BRANCHES), "ROBOTLAB_TEST_REDUCER": "instant",
           "ROBOTLAB_TEST_LLM": f"tests.robotlab_django.fanout.{llm}_llm",
           "ROBOTLAB_TEST_LLM_BASE": server_url, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return env, drop


def start_workers(count: int, env: dict[str, str], workdir: Path) -> list[subprocess.Popen[bytes]]:
    """``count`` Celery worker processes (threads pool, 16 threads each) on this run's queue."""
    from tests.robotlab_django.settings import TASK_QUEUE

    workers = []
    for index in range(1, count + 1):
        with (workdir / f"worker{count}-{index}.log").open("ab") as log:
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker",
                 "--pool=threads", "-c", "16", "-Q", TASK_QUEUE, "-n", f"bench{index}@%h", "-l", "warning",
                 "--without-heartbeat", "--without-gossip", "--without-mingle"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return workers


def stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    """Stop the workers (SIGTERM, then SIGKILL after 15 s)."""
    import signal

    for worker in workers:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=15)


def dispatch_turn() -> Any:
    """Queue a ``fanout`` turn on a new thread and send it to the workers."""
    from robotlab_django.runs import executor
    from robotlab_django.runs.records import start_run

    row = start_run(None, "fanout", "Split the work")
    executor.dispatch(row)
    return row


def wait_finished(pks: list[Any], timeout: float = 300.0) -> None:
    """Poll until every turn row in ``pks`` is completed or failed."""
    from robotlab_django.models import RobotResult

    deadline = time.monotonic() + timeout
    while RobotResult.objects.filter(pk__in=pks).exclude(status__in=FINISHED).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"turns {pks} did not finish in {timeout:g} s")
        time.sleep(0.002)


def one_turn() -> tuple[float, int, str]:
    """Run one turn: ``(wall seconds, distinct worker processes that ran a branch, status)``."""
    from robotlab_django.models import RobotResult

    start = time.perf_counter()
    row = dispatch_turn()
    wait_finished([row.pk])
    wall = time.perf_counter() - start
    if os.environ.get("BENCH_TIMELINE"):
        turn = RobotResult.objects.get(pk=row.pk)
        for task in RobotResult.objects.filter(parent_id=row.pk).order_by("pk"):
            print(f"  {task.task_name:10} created +{(task.created_at - turn.created_at).total_seconds():.3f} "
                  f"started +{(task.started_at - turn.created_at).total_seconds():.3f} "
                  f"finished +{(task.finished_at - turn.created_at).total_seconds():.3f} {task.worker_pid}")
        print(f"  turn finished +{(turn.finished_at - turn.created_at).total_seconds():.3f}")
    branches = RobotResult.objects.filter(parent_id=row.pk, task_name__startswith="branch_")
    workers = len(set(branches.values_list("worker", "worker_pid")))
    return wall, workers, str(RobotResult.objects.get(pk=row.pk).status)


def throughput(concurrent: int) -> float:
    """Turns per second for ``concurrent`` turns dispatched at once."""
    start = time.perf_counter()
    pks = [dispatch_turn().pk for _ in range(concurrent)]
    wait_finished(pks)
    return concurrent / (time.perf_counter() - start)


def cpu_seconds(workers: list[subprocess.Popen[bytes]]) -> float:
    """User and system CPU seconds the worker processes (their threads included) have used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for worker in workers:
        fields = Path(f"/proc/{worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def machine_ticks() -> tuple[int, int]:
    """This machine's busy and total CPU ticks so far, over every core (``/proc/stat``)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def report_stuck(workdir: Path, count: int) -> None:
    """Print the unfinished turns' task rows and the end of each worker's log (the work directory goes)."""
    from robotlab_django.models import RobotResult

    for turn in RobotResult.objects.filter(parent__isnull=True).exclude(status__in=FINISHED):
        rows = RobotResult.objects.filter(parent_id=turn.pk).order_by("pk")
        print(f"turn {turn.pk} {turn.status}: " + ", ".join(
            f"{row.task_name} {row.status} x{row.attempts} {row.error_type}" for row in rows), file=sys.stderr)
    for log in sorted(workdir.glob(f"worker{count}-*.log")):
        print(f"--- {log.name}", *log.read_text(errors="replace").splitlines()[-40:], sep="\n", file=sys.stderr)


def _purge(queue: str) -> None:
    """Drop what an earlier count left in ``queue``, through Celery (so under this run's key prefix)."""
    from kombu import Queue

    from tests.robotlab_django.celery_app import app

    with app.connection_for_write() as connection:
        Queue(queue).bind(connection.default_channel).purge()


def measure(count: int, env: dict[str, str], workdir: Path, runs: int, concurrent: int) -> dict[str, Any]:
    """The figures for ``count`` worker processes."""
    from tests.robotlab_django.settings import TASK_QUEUE

    # nothing left of an earlier count (the run's keys carry its prefix: no other run's are touched)
    _purge(TASK_QUEUE)
    workers = start_workers(count, env, workdir)
    try:
        one_turn()  # warm-up: the workers are up, their connections open
        turns = [one_turn() for _ in range(runs)]
        cpu, (busy, total) = cpu_seconds(workers), machine_ticks()
        rate = throughput(concurrent)
        cpu = (cpu_seconds(workers) - cpu) / concurrent
        busy_after, total_after = machine_ticks()
    except TimeoutError:
        report_stuck(workdir, count)
        raise
    finally:
        stop_workers(workers)
    return {"processes": count, "wall": statistics.median(t[0] for t in turns), "cpu_per_turn": cpu,
            "workers": max(t[1] for t in turns), "statuses": sorted({t[2] for t in turns}), "turns_per_s": rate,
            "machine_busy": (busy_after - busy) / max(1, total_after - total)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--counts", default="1,2,4")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/10")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--db-pool", action="store_true",
                        help="PostgreSQL through psycopg's pool, as the example project (else a connection a job)")
    parser.add_argument("--llm", choices=("auto", "server", "direct"), default="auto",
                        help="auto: RobotLab's default transport (AutoLLM, what ROBOTLAB['API_BASE'] gives an app); "
                             "server: litellm (LLMClient); direct: one robotlab.OpenAICompatibleLLM per process")
    args = parser.parse_args()
    from robotlab.testing.server import FakeLLMServerProcess, reply

    critical = 2 * args.latency  # plan -> branch; the reducer answers without a model call
    results = []
    if args.db_pool:
        os.environ["ROBOTLAB_TEST_DB_POOL"] = "1"
    with tempfile.TemporaryDirectory() as tmp, \
            FakeLLMServerProcess(default=reply("Done."), latency=args.latency) as server:
        workdir = Path(tmp)
        env, drop = environment(workdir, server.base_url, args.redis_url, args.db, args.llm)
        try:
            os.environ.update(env)
            subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                           timeout=300)
            import django

            django.setup()
            import tests.robotlab_django.celery_app  # noqa: F401  (the project's Celery app sends the jobs)

            for count in (int(c) for c in args.counts.split(",")):
                figures = measure(count, env, workdir, args.runs, args.concurrent)
                results.append(figures)
                print(f"{count} worker process(es): wall {figures['wall'] * 1000:.0f} ms, critical path "
                      f"{critical * 1000:.0f} ms, wall/critical {figures['wall'] / critical:.2f}, branches on "
                      f"{figures['workers']} worker(s), {args.concurrent} concurrent turns: "
                      f"{figures['turns_per_s']:.2f} turns/s ({', '.join(figures['statuses'])}); worker CPU "
                      f"{figures['cpu_per_turn'] * 1000:.0f} ms a turn (its start and {BRANCHES + 2} tasks), machine "
                      f"{figures['machine_busy']:.0%} busy over {os.cpu_count()} cores", flush=True)
        finally:
            from django.db import connections

            connections.close_all()
            drop()
    last = results[-1]
    rates = " ".join(f"{r['processes']}w={r['turns_per_s']:.2f}" for r in results)
    print(f"distributed: workers={last['processes']} wall/critical={last['wall'] / critical:.2f} turns/s {rates}")


if __name__ == "__main__":
    main()
