"""Issue 31's worker figure: a fresh Celery worker's first job against its later ones, warmed up or not.

Each round starts a real Celery worker (``--pool=prefork -c 1``, the tests' Celery app, Redis database 15 as
broker, its own queue) twice: once with ``ROBOTLAB["WORKER_WARM_UP"]`` on (the default: the worker builds what a
first job needs at start,
:mod:`robotlab_django.workers.warm_up`), once with it off. When the worker is ready this process
sends ``--jobs`` runs of the ``echo`` robot, one after another, each waited for and each in a new thread (so
every job does the same work): the model is ``openai/gpt-4o-mini``
on the default transport (the direct client) against a fake OpenAI-compatible server in its own process (0 ms
latency), the jobs share one SQLite file, and they stream through the Redis channel layer (as workers in other
processes than the pages must). A job's figure is the run's own time in the worker (its row's
``finished_at - started_at``) and the wall from sending it to its result (the broker hop included).

The target: a fresh worker's first job costs no more than 1.5x a later one (medians over the rounds).
The last line reads ``worker_first_job: first=<ms> later=<ms> ratio=<x> cold_first=<ms> cold_ratio=<x>``.

    .venv/bin/python benchmarks/worker_first_job.py [--rounds 3] [--jobs 6] [--json] [--logs DIR]

Redis must answer on 127.0.0.1:6379 (nothing is flushed: the queue and keys carry this run's id).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from robotlab.testing.server import FakeLLMServerProcess  # noqa: E402 (after the path is set)

READY_TIMEOUT = 120.0
#: Seconds the worker is left alone once it says it is ready, so its pool child has started (and warmed up).
SETTLE = 3.0


def environment(workdir: Path, api_base: str, run_id: str) -> dict[str, str]:
    """The environment of this process (set before Django starts) and of the workers."""
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "PYTHONPATH": path,
            "ROBOTLAB_TEST_DB": "sqlite", "ROBOTLAB_TEST_SQLITE_PATH": str(workdir / "db.sqlite3"),
            "ROBOTLAB_TEST_RUN_ID": run_id, "ROBOTLAB_TEST_EXECUTOR": "celery",
            "ROBOTLAB_TEST_LLM": "tests.robotlab_django.server_llm.fake_server_llm",
            "ROBOTLAB_TEST_FAKE_API_BASE": api_base, "ROBOT_LAB_MODEL": "openai/gpt-4o-mini",
            "ROBOTLAB_TEST_REDIS_URL": "redis://127.0.0.1:6379/15"}


def start_worker(workdir: Path, env: dict[str, str], queue: str, name: str, warm: bool) -> subprocess.Popen[bytes]:
    """A prefork worker with one child on ``queue``, once it logged that it is ready."""
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker", "--pool=prefork",
             "-c", "1", "-Q", queue, "-n", f"{name}@%h", "-l", "info", "--without-heartbeat", "--without-gossip",
             "--without-mingle"],
            cwd=ROOT, env={**env, "ROBOTLAB_TEST_WORKER_WARM_UP": "1" if warm else "0"}, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True)
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


def run_jobs(queue: str, jobs: int) -> list[dict[str, float]]:
    """Send ``jobs`` runs of ``echo`` one after another; each one's time in the worker and its wall, in ms."""
    from django.db import transaction

    from robotlab_django import services, tasks
    from robotlab_django.models import RobotResult
    from robotlab_django.runs import executor

    figures = []
    for index in range(jobs):
        thread = services.get_thread(f"first-job-{uuid.uuid4().hex[:8]}")  # a new conversation: equal jobs
        started = time.perf_counter()
        with transaction.atomic():
            row = services.start_run(thread, "echo", f"Hello {index}")
            task_id = executor.enqueue(row, queue=queue)
        answer = tasks.run_robot.AsyncResult(task_id).get(timeout=120)
        wall = (time.perf_counter() - started) * 1000
        row = RobotResult.objects.get(pk=row.pk)
        if answer["status"] != "completed" or row.started_at is None or row.finished_at is None:
            raise RuntimeError(f"job {index} did not complete: {answer} {row.error}")
        figures.append({"job_ms": (row.finished_at - row.started_at).total_seconds() * 1000, "wall_ms": wall})
    return figures


def warm_client(queue: str) -> None:
    """Make this process's first run row and its first send (the broker connection) before any worker is timed.

    The message goes to a queue no worker reads, deleted at once.
    """
    import redis
    from django.conf import settings
    from django.db import transaction

    from robotlab_django import services
    from robotlab_django.runs import executor

    unread = f"{queue}-unread"
    with transaction.atomic():
        executor.enqueue(services.start_run(services.get_thread("first-job-client"), "echo", "Hello"), queue=unread)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(unread)


def summary(rounds: list[list[dict[str, float]]]) -> dict[str, float]:
    """Medians of the first jobs and of the later ones, and their ratio."""
    first = statistics.median(r[0]["job_ms"] for r in rounds)
    later = statistics.median(f["job_ms"] for r in rounds for f in r[1:])
    return {"first_ms": first, "later_ms": later, "ratio": first / later,
            "first_wall_ms": statistics.median(r[0]["wall_ms"] for r in rounds),
            "later_wall_ms": statistics.median(f["wall_ms"] for r in rounds for f in r[1:]),
            "first_max_ms": max(r[0]["job_ms"] for r in rounds)}


def main() -> None:
    """Start the workers, time their jobs and print the medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh workers per mode")
    parser.add_argument("--jobs", type=int, default=6, help="jobs per worker (the first and the later ones)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--logs", help="keep the workers' logs (and the database) in this folder")
    args = parser.parse_args()
    run_id = f"firstjob{uuid.uuid4().hex[:8]}"
    queue = f"robotlab-first-job-{run_id}"
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServerProcess(default="Hello there") as server:
        workdir = Path(args.logs or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        env = environment(workdir, server.base_url, run_id)
        os.environ.update(env)
        subprocess.run([sys.executable, "-m", "django", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True,
                       timeout=300)
        import django

        django.setup()
        import tests.robotlab_django.celery_app  # noqa: F401  (a project imports its Celery app at startup)

        warm_client(queue)
        figures: dict[str, list[list[dict[str, float]]]] = {"warm": [], "cold": []}
        for index in range(args.rounds):  # alternate, so both modes see the same machine
            for mode in ("warm", "cold"):
                worker = start_worker(workdir, env, queue, f"{mode}{index}", warm=mode == "warm")
                try:
                    figures[mode].append(run_jobs(queue, args.jobs))
                finally:
                    stop(worker)
    results = {mode: summary(rounds) for mode, rounds in figures.items()}
    if args.json:
        print(json.dumps({"results": results, "rounds": figures}, indent=2))
        return
    print(f"worker first job, {args.rounds} fresh workers per mode, {args.jobs} jobs each (medians, ms), "
          f"{os.cpu_count()} cores")
    print(f"  {'mode':6} {'first job':>10} {'later':>8} {'first/later':>12} {'max first':>10} {'first wall':>11} "
          f"{'later wall':>11}")
    for mode, r in results.items():
        print(f"  {mode:6} {r['first_ms']:10.1f} {r['later_ms']:8.1f} {r['ratio']:12.2f} {r['first_max_ms']:10.1f} "
              f"{r['first_wall_ms']:11.1f} {r['later_wall_ms']:11.1f}")
    warm, cold = results["warm"], results["cold"]
    print(f"target: first <= 1.5x later: {'met' if warm['ratio'] <= 1.5 else 'missed'} ({warm['ratio']:.2f}x); "
          f"warming saves {cold['first_ms'] - warm['first_ms']:.0f} ms of the first job")
    print(f"worker_first_job: first={warm['first_ms']:.0f} later={warm['later_ms']:.0f} ratio={warm['ratio']:.2f} "
          f"cold_first={cold['first_ms']:.0f} cold_ratio={cold['ratio']:.2f}")


if __name__ == "__main__":
    main()
