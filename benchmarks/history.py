"""Benchmark B4: loading a 1,000-message thread into a robot, and the admin list of 10,000 results.

Run it standalone; it configures Django itself, on a temporary database it creates and drops::

    .venv/bin/python benchmarks/history.py                 # SQLite, and PostgreSQL when a server answers
    .venv/bin/python benchmarks/history.py --db sqlite     # one database
    .venv/bin/python benchmarks/history.py --json          # figures as JSON

Targets (docs: spec reliability_perf B4, issue 5): the history load takes at most 20 ms on SQLite and
30 ms on PostgreSQL in at most 3 queries; the admin list of results renders in at most 300 ms, and
its query count does not grow with the number of rows on a page. PostgreSQL is reached at
127.0.0.1:5432 as ``$PGUSER`` (default ``postgres``) with trust authentication.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HISTORY_MESSAGES = 1_000
ADMIN_RESULTS = 10_000
TARGETS: dict[str, Any] = {
    "history_ms": {"sqlite": 20.0, "postgres": 30.0},
    "history_queries": 3,
    "admin_ms": 300.0,
}

urlpatterns: list[Any] = []  # filled once Django is configured (this module is the ROOT_URLCONF)


def _postgres_params() -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": 5432, "user": os.environ.get("PGUSER", "postgres")}


def _postgres_reachable() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed"
    try:
        psycopg.connect(dbname="postgres", connect_timeout=3, **_postgres_params()).close()
    except psycopg.Error as exc:
        return f"PostgreSQL not reachable: {str(exc).strip()}"
    return None


def _configure(vendor: str, name: str) -> None:
    import django
    from django.conf import settings

    if vendor == "postgres":
        params = _postgres_params()
        database = {"ENGINE": "django.db.backends.postgresql", "NAME": name, "HOST": params["host"],
                    "PORT": params["port"], "USER": params["user"]}
    else:
        database = {"ENGINE": "django.db.backends.sqlite3", "NAME": name,
                    "OPTIONS": {"transaction_mode": "IMMEDIATE"}}
    settings.configure(
        DEBUG=False, SECRET_KEY="benchmark-only", ALLOWED_HOSTS=["testserver"], USE_TZ=True, TIME_ZONE="UTC",
        DATABASES={"default": database}, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                        "django.contrib.sessions", "django.contrib.messages", "robotlab_django"],
        MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                    "django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware",
                    "django.contrib.auth.middleware.AuthenticationMiddleware",
                    "django.contrib.messages.middleware.MessageMiddleware"],
        ROOT_URLCONF=__name__,
        TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                    "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                       "django.contrib.auth.context_processors.auth",
                                                       "django.contrib.messages.context_processors.messages"]}}],
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        ROBOTLAB={"EXECUTOR": "sync", "LLM": "robotlab.testing.DemoLLM", "AUTODISCOVER": False},
    )
    django.setup()
    from django.contrib import admin
    from django.urls import path

    urlpatterns.append(path("admin/", admin.site.urls))


def _timed(action: Callable[[], Any], repeat: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        action()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return times


def _queries(action: Callable[[], Any]) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured)


def _seed_history(session_id: str) -> None:
    from robotlab_django.models import RobotResult, Status, Thread

    thread = Thread.objects.create(session_id=session_id, robot_name="bench")
    rows = []
    for number in range(1, HISTORY_MESSAGES // 4 + 1):
        call_id = f"call_{number}"
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": f"Question {number}: where is order {number}? " + "details " * 20},
            {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": {
                "name": "lookup_order", "arguments": json.dumps({"order_id": number})}}]},
            {"role": "tool", "tool_call_id": call_id, "name": "lookup_order",
             "content": json.dumps({"order_id": number, "status": "shipped", "eta": "tomorrow"})},
            {"role": "assistant", "content": f"Order {number} has shipped and arrives tomorrow. " + "more " * 20},
        ]
        rows.append(RobotResult(thread=thread, sequence_number=number, robot_name="bench", status=Status.COMPLETED,
                                input=messages[0]["content"], reply=messages[-1]["content"], messages=messages,
                                model="fake", input_tokens=120, output_tokens=40))
    RobotResult.objects.bulk_create(rows, batch_size=500)


def _seed_results(count: int) -> None:
    from decimal import Decimal

    from robotlab_django.models import RobotResult, Status, Thread

    per_thread = 50
    threads = Thread.objects.bulk_create([Thread(session_id=f"admin-{index}", robot_name="bench")
                                          for index in range(count // per_thread)])
    rows = [RobotResult(thread=thread, sequence_number=number, robot_name=("bench", "support", "billing")[number % 3],
                        status=Status.COMPLETED, model=("openai/gpt-4o-mini", "anthropic/claude")[number % 2],
                        input=f"Question {number}", reply=f"Answer {number}", input_tokens=100 + number,
                        output_tokens=20, cost=Decimal("0.00012"), duration=0.8)
            for thread in threads for number in range(1, per_thread + 1)]
    RobotResult.objects.bulk_create(rows, batch_size=1000)


def _measure(vendor: str, repeat: int) -> dict[str, Any]:
    from django.core.management import call_command
    from django.test import Client

    import robotlab
    from robotlab.testing import FakeLLM
    from robotlab_django import services
    from robotlab_django.admin import RobotResultAdmin
    from robotlab_django.registry import registry

    call_command("migrate", verbosity=0)
    registry.register(lambda **options: robotlab.build(name="bench", system_prompt="You help.", **options),
                      name="bench", replace=True)
    _seed_history("history-1000")
    restored = services.restore_robot("history-1000", llm=FakeLLM())
    assert len(restored.messages) == HISTORY_MESSAGES, len(restored.messages)

    def load() -> Any:
        return services.restore_robot("history-1000", llm=FakeLLM())

    history = _timed(load, repeat * 3)
    history_queries = _queries(load)

    _seed_results(ADMIN_RESULTS)
    from django.contrib.auth import get_user_model

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("bench", "bench@example.com", "pw"))

    def page(url: str = "/admin/robotlab/robotresult/") -> None:
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    admin_times = _timed(page, repeat)
    per_page = RobotResultAdmin.list_per_page
    admin_queries = _queries(page)
    last_page_queries = _queries(lambda: page("/admin/robotlab/robotresult/?p=99"))
    try:
        RobotResultAdmin.list_per_page = 20
        small_page_queries = _queries(page)
    finally:
        RobotResultAdmin.list_per_page = per_page
    return {
        "vendor": vendor,
        "history_messages": HISTORY_MESSAGES,
        "history_ms_median": round(statistics.median(history), 2),
        "history_ms_p95": round(sorted(history)[int(len(history) * 0.95) - 1], 2),
        "history_queries": history_queries,
        "admin_results": ADMIN_RESULTS,
        "admin_rows_per_page": per_page,
        "admin_ms_median": round(statistics.median(admin_times), 1),
        "admin_ms_max": round(max(admin_times), 1),
        "admin_queries": admin_queries,
        "admin_queries_last_page": last_page_queries,
        "admin_queries_20_rows": small_page_queries,
    }


def _child(vendor: str, repeat: int) -> dict[str, Any]:
    """Measure one database in this process (Django can be configured once per process)."""
    if vendor == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            _configure("sqlite", str(Path(directory) / "bench.sqlite3"))
            return _measure("sqlite", repeat)
    import psycopg

    name = f"robotlab_bench_{os.getpid()}"
    with psycopg.connect(dbname="postgres", autocommit=True, **_postgres_params()) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        _configure("postgres", name)
        return _measure("postgres", repeat)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(dbname="postgres", autocommit=True, **_postgres_params()) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def _report(results: list[dict[str, Any]], skipped: dict[str, str]) -> str:
    lines = [f"robotlab_django history benchmark - Python {platform.python_version()}, {platform.machine()}", ""]
    header = f"{'database':<10} {'measure':<44} {'value':>10} {'target':>10} {'ratio':>7}"
    lines += [header, "-" * len(header)]
    for result in results:
        vendor = result["vendor"]
        rows = [
            (f"load {result['history_messages']:,}-message thread (median ms)", result["history_ms_median"],
             TARGETS["history_ms"][vendor]),
            ("load 1,000-message thread (p95 ms)", result["history_ms_p95"], TARGETS["history_ms"][vendor]),
            ("load 1,000-message thread (queries)", result["history_queries"], TARGETS["history_queries"]),
            (f"admin list of {result['admin_results']:,} results (median ms)", result["admin_ms_median"],
             TARGETS["admin_ms"]),
            (f"admin list queries ({result['admin_rows_per_page']} rows, page 1)", result["admin_queries"], None),
            ("admin list queries (page 99)", result["admin_queries_last_page"], result["admin_queries"]),
            ("admin list queries (20 rows a page)", result["admin_queries_20_rows"], result["admin_queries"]),
        ]
        for label, value, target in rows:
            ratio = f"{value / target:.2f}" if target else "-"
            lines.append(f"{vendor:<10} {label:<44} {value:>10} {'' if target is None else target:>10} {ratio:>7}")
    for vendor, reason in skipped.items():
        lines.append(f"{vendor:<10} skipped: {reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure the chosen databases and print the figures with their targets."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "all"), default="all")
    parser.add_argument("--repeat", type=int, default=10, help="Timed repetitions (history runs 3x as many).")
    parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
    parser.add_argument("--child", choices=("sqlite", "postgres"), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.child:
        print(json.dumps(_child(options.child, options.repeat)))
        return 0
    vendors = ["sqlite", "postgres"] if options.db == "all" else [options.db]
    results, skipped = [], {}
    for vendor in vendors:
        if vendor == "postgres" and (reason := _postgres_reachable()):
            skipped[vendor] = reason
            continue
        process = subprocess.run([sys.executable, __file__, "--child", vendor, "--repeat", str(options.repeat)],
                                 capture_output=True, text=True, cwd=ROOT)
        if process.returncode != 0:
            sys.stderr.write(process.stdout + process.stderr)
            return process.returncode
        results.append(json.loads(process.stdout.strip().splitlines()[-1]))
    if options.json:
        print(json.dumps({"results": results, "skipped": skipped, "targets": TARGETS}, indent=2))
    else:
        print(_report(results, skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
