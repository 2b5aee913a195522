"""Daily budgets on the real stack, run as a driver process by test_budget_workers.py and benchmarks/budgets.py.

``python -m tests.robotlab_django.budget_workers <scenario> --workdir DIR`` sets Django up against the shared
database named by the environment (see :func:`tests.robotlab_django.faults.database_env`), serves a fake
OpenAI-compatible model that counts every request, starts Celery workers (:mod:`tests.robotlab_django.budget_celery`,
``ROBOTLAB["BUDGETS"]`` from ``ROBOTLAB_TEST_BUDGETS``) and prints what it observed as one JSON line:

* ``concurrent``: ``--runs`` runs of one user at once on two worker nodes (``--concurrency`` pool children each),
  each model call using ``--call-tokens`` tokens against the user's ``--limit``; facts: what the ledger consumed,
  what stays reserved, the requests the model got, and the tokens the runs' rows record.
* ``kill``: SIGKILL the pool child of a streaming run; after its retry the ledger must hold no reservation of it.
* ``network``: one ``fanout`` turn with ``--branches`` branches and a ``token_budget`` of ``--budget`` on two nodes,
  each call using ``--call-tokens`` (robots with ``--max-tokens``); facts: what the network's ledger consumed, the
  requests the model got, the tokens the task rows and the usage rollups record, and the tasks claimed more than
  once (``run_again``: ``task:attempts``; a task run twice pays or counts a call twice).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.robotlab_django.faults import (
    LLM_BASE_ENV,
    REDIS_URL,
    ROOT,
    WAIT,
    Processes,
    _processes,
    _row,
    _saved_deltas,
    _setup,
    children,
    database_env,
    wait_for,
)

#: The environment variable holding ``ROBOTLAB["BUDGETS"]`` (JSON) for the workers.
BUDGETS_ENV = "ROBOTLAB_TEST_BUDGETS"
_FINISHED = {"completed", "failed", "cancelled"}


def run(workdir: Path, *args: str) -> dict[str, Any]:
    """Run the driver (``python -m tests.robotlab_django.budget_workers *args``) on a fresh PostgreSQL database.

    Returns:
        The facts it printed.

    Raises:
        RuntimeError: the driver failed (its output and the workers' logs are in the message).
    """
    saved = os.environ.get("ROBOTLAB_TEST_DB")
    os.environ["ROBOTLAB_TEST_DB"] = "postgres"
    try:
        database, drop = database_env(workdir)
    finally:
        if saved is None:
            os.environ.pop("ROBOTLAB_TEST_DB")
        else:
            os.environ["ROBOTLAB_TEST_DB"] = saved
    env = {**os.environ, **database, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings",
           "PYTHONPATH": str(ROOT), "ROBOTLAB_TEST_REDIS_URL": REDIS_URL}
    try:
        driver = subprocess.run([sys.executable, "-m", "tests.robotlab_django.budget_workers", *args,
                                 "--workdir", str(workdir)], cwd=ROOT, env=env, capture_output=True, text=True,
                                timeout=600)
    finally:
        drop()
    if driver.returncode != 0:
        logs = "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-6000:]}"
                         for log in sorted(workdir.glob("*.log")))
        raise RuntimeError(f"{driver.stdout}\n{driver.stderr[-8000:]}\n{logs}")
    return dict(json.loads(driver.stdout.strip().splitlines()[-1]))


def start_node(processes: Processes, queue: str, name: str, concurrency: int) -> Any:
    """A Celery worker node named ``name`` with ``concurrency`` prefork children on ``queue``, once it is ready."""
    worker = processes.start(name, [sys.executable, "-m", "celery", "-A", "tests.robotlab_django.budget_celery",
                                    "worker", "--pool=prefork", "-c", str(concurrency), "-Q", queue, "-n",
                                    f"{name}-{uuid.uuid4().hex[:6]}@%h", "-l", "info", "--without-heartbeat",
                                    "--without-gossip", "--without-mingle"])
    log = processes.workdir / f"{name}.log"
    wait_for(lambda: " ready." in log.read_text(errors="replace"), f"worker {name} to be ready", timeout=2 * WAIT)
    return worker


def _ledger(scope: str) -> dict[str, Any]:
    from robotlab_django.models import BudgetLedger, BudgetReservation

    row = BudgetLedger.objects.filter(scope=scope).first()
    return {"consumed": row.consumed_tokens if row else 0, "reserved": row.reserved_tokens if row else 0,
            "reservation_rows": BudgetReservation.objects.filter(scope=scope).count()}


def _settled(scope: str) -> dict[str, Any]:
    """The scope's ledger once the calls still in flight settled (a finished row's call may settle just after)."""

    def settled() -> bool:
        ledger = _ledger(scope)
        return not ledger["reserved"] and not ledger["reservation_rows"]

    try:
        wait_for(settled, f"the calls in flight in {scope} to settle", timeout=WAIT)
    except TimeoutError:
        pass  # reported as it is
    return _ledger(scope)


def _rows(pks: list[int]) -> list[Any]:
    from robotlab_django.models import RobotResult

    return list(RobotResult.objects.filter(pk__in=pks))


def concurrent(processes: Processes, server: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``args.runs`` runs of one user at once on two nodes; what the ledger, the model and the rows saw."""
    from robotlab.testing.server import tokens
    from robotlab_django import services
    from robotlab_django.runs import executor

    output = args.call_tokens - 50
    server.default = tokens(20, tokens_per_second=20, usage=(50, output))  # about 1 s a call
    user, _session = _setup()
    queue = f"robotlab-budgets-{uuid.uuid4().hex[:8]}"
    for node in ("node1", "node2"):
        start_node(processes, queue, node, args.concurrency)
    pks = []
    for _ in range(args.runs):
        row = services.start_run(services.get_thread(None, user=user), "echo", "Go")
        pks.append(row.pk)
    started = time.monotonic()
    for pk in pks:
        executor.enqueue(pk, queue=queue)  # autocommit: sent at once
    wait_for(lambda: all(str(row.status) in _FINISHED for row in _rows(pks)), "every run to finish",
             timeout=4 * WAIT)
    rows = _rows(pks)
    statuses: dict[str, int] = {}
    for row in rows:
        key = f"{row.status}:{row.error_type}" if row.error_type else str(row.status)
        statuses[key] = statuses.get(key, 0) + 1
    nodes = sum("robotlab_django.tasks.run_robot" in (processes.workdir / f"{node}.log").read_text(errors="replace")
                .split(" ready.", 1)[-1] for node in ("node1", "node2"))
    return {"limit": args.limit, "runs": args.runs, "call_tokens": args.call_tokens,
            "seconds": round(time.monotonic() - started, 2), "requests": len(server.requests),
            "paid_tokens": len(server.requests) * args.call_tokens,
            "row_tokens": sum(int(row.input_tokens or 0) + int(row.output_tokens or 0) for row in rows),
            "statuses": statuses, "nodes_that_ran": nodes, **_settled(f"user:{user.pk}")}


def kill(processes: Processes, server: Any, args: argparse.Namespace) -> dict[str, Any]:
    """SIGKILL the pool child of a streaming run; the ledger after its retry."""
    from robotlab.testing.server import tokens
    from robotlab_django import services
    from robotlab_django.runs import executor

    server.default = tokens(60, tokens_per_second=40, usage=(100, 200))
    user, _session = _setup()
    queue = f"robotlab-budgets-{uuid.uuid4().hex[:8]}"
    row = services.start_run(services.get_thread(None, user=user), "echo", "Go")
    executor.enqueue(row, queue=queue)
    worker = start_node(processes, queue, "worker", 1)
    wait_for(lambda: str(_row(row.pk).status) == "running" and _saved_deltas(row.pk) >= 2,
             "the run to be streaming")
    held_at_kill = _ledger(f"user:{user.pk}")
    for pid in children(worker.pid):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: str(_row(row.pk).status) in _FINISHED, "the killed run to finish on its retry", timeout=2 * WAIT)
    final = _row(row.pk)
    return {"status": str(final.status), "attempts": final.attempts, "requests": len(server.requests),
            "row_tokens": int(final.input_tokens or 0) + int(final.output_tokens or 0),
            "held_at_kill": held_at_kill, **_settled(f"user:{user.pk}")}


def network(processes: Processes, server: Any, args: argparse.Namespace) -> dict[str, Any]:
    """One ``fanout`` turn (plan -> ``--branches`` branches -> reduce) on two nodes against its ``token_budget``."""
    from robotlab.testing.server import tokens
    from robotlab_django.conf import app_settings
    from robotlab_django.models import RobotResult, UsageRollup
    from robotlab_django.runs import executor
    from robotlab_django.runs.records import start_run

    output = args.call_tokens - 40
    server.default = tokens(10, tokens_per_second=20, usage=(40, output))  # about half a second a call
    _setup()  # the schema
    queue = str(app_settings.TASK_QUEUE)  # where the turn's task rows are sent
    for node in ("node1", "node2"):
        start_node(processes, queue, node, args.concurrency)
    turn = start_run(f"budget-{uuid.uuid4().hex[:8]}", "fanout", "Split the work")
    executor.dispatch(turn)
    wait_for(lambda: str(_row(turn.pk).status) in _FINISHED
             and not RobotResult.objects.filter(parent_id=turn.pk, status__in=["queued", "running"]).exists(),
             "the turn and its tasks to end", timeout=4 * WAIT)
    final = _row(turn.pk)
    rows = list(RobotResult.objects.filter(parent_id=turn.pk))
    rolled = sum(int(r.input_tokens) + int(r.output_tokens) for r in UsageRollup.objects.all())
    return {"budget": args.budget, "branches": args.branches, "call_tokens": args.call_tokens,
            "max_tokens": args.max_tokens, "status": str(final.status), "error": final.error,
            "requests": len(server.requests), "paid_tokens": len(server.requests) * args.call_tokens,
            "row_tokens": sum(int(r.input_tokens or 0) + int(r.output_tokens or 0) for r in rows),
            "rollup_tokens": rolled,
            "task_statuses": sorted(f"{r.task_name}:{r.status}" for r in rows),
            "run_again": sorted(f"{r.task_name}:{r.attempts}" for r in rows if r.attempts > 1),  # claimed twice
            **_settled(f"network:{turn.run_id}")}


def main() -> int:
    """Run one scenario (the environment names the database and Redis) and print its facts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["concurrent", "kill", "network"])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--limit", type=int, default=10_000)
    parser.add_argument("--call-tokens", type=int, default=5_000)
    parser.add_argument("--reserve-tokens", type=int, default=4_000)
    parser.add_argument("--branches", type=int, default=8)
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=0)
    args = parser.parse_args()
    from robotlab.testing.server import FakeLLMServer

    server = FakeLLMServer().start()
    os.environ.update({LLM_BASE_ENV: server.base_url, "ROBOTLAB_TEST_LLM": "tests.robotlab_django.faults.server_llm",
                       "ROBOT_LAB_MODEL": "openai/gpt-4o-mini", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                       BUDGETS_ENV: json.dumps({"USER_TOKENS": args.limit, "RESERVE_TOKENS": args.reserve_tokens})})
    if args.scenario == "network":  # the fanout network through the celery executor, one job per task
        from tests.robotlab_django.fanout import BUDGET_ENV, MAX_TOKENS_ENV

        fanout = "tests.robotlab_django.fanout"

        os.environ.update({"ROBOTLAB_TEST_EXECUTOR": "celery", "ROBOTLAB_TEST_FANOUT": str(args.branches),
                           "ROBOTLAB_TEST_TASK_QUEUE": f"robotlab-budgets-{uuid.uuid4().hex[:8]}",
                           "ROBOTLAB_TEST_NETWORKS": json.dumps({"fanout": f"{fanout}.fanout_network"}),
                           "ROBOTLAB_TEST_LLM": f"{fanout}.server_llm",
                           "ROBOTLAB_TEST_LLM_BASE": server.base_url, BUDGET_ENV: str(args.budget),
                           MAX_TOKENS_ENV: str(args.max_tokens or "")})
    import django

    django.setup()
    import tests.robotlab_django.budget_celery  # noqa: F401  (tasks are sent through its broker)

    with _processes(args.workdir) as processes:
        facts = {"concurrent": concurrent, "kill": kill, "network": network}[args.scenario](processes, server, args)
    server.stop()
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
