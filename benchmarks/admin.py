"""The admin at a busy site's size: each page's median time and query count over 1,000,000 runs on PostgreSQL.

Fills a PostgreSQL database (``robotlab_admin_bench`` on 127.0.0.1:5432, kept between runs; ``--refill``
starts over) by SQL ``generate_series``: ``--runs`` result rows (default 1,000,000) over a quarter as many
threads, 365 days, four robots, three models, 50 users (a fifth of the threads anonymous), 3 % failed and 1 %
cancelled. The usage rollups are then rebuilt from the rows (what migration 0008 does on an existing site) and
the tables analyzed. Each page is fetched once to warm up, then ``--repeat`` times by Django's test client as a
superuser; it prints the median ms, the number of queries and the page's size. Issue 15's target: every page
<= 200 ms with a number of queries that does not grow with the data.

The last line reads ``admin: runs=<n> slowest=<page> <ms> ms max_queries=<q>``.

    .venv/bin/python benchmarks/admin.py [--runs 1000000] [--repeat 5] [--refill]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATABASE = "robotlab_admin_bench"
ROBOTS = ("support", "billing", "triage", "writer")
MODELS = ("gpt-4o-mini", "claude-3-5-haiku", "llama-3.1-70b")
USERS = 50


def _setup(database: str) -> None:
    user = os.environ.get("PGUSER", "postgres")
    os.environ.update(ROBOTLAB_TEST_DB="postgres", DJANGO_SETTINGS_MODULE="tests.robotlab_django.settings",
                      ROBOTLAB_TEST_DATABASE_URL=f"postgres://{user}@127.0.0.1:5432/{database}")
    import psycopg

    with psycopg.connect(host="127.0.0.1", user=user, dbname="postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone():
            conn.execute(f'CREATE DATABASE "{database}"')
    import django

    django.setup()
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    # a connection kept across requests, as a site with CONN_MAX_AGE has (and the queries stay countable)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _literal(field: Any) -> str:
    """A SQL literal of ``field``'s Python default (the columns the fill does not set)."""
    import json

    from django.db.models import NOT_PROVIDED

    if field.null and (field.default is NOT_PROVIDED or field.default is None):
        return "NULL"
    value = field.get_default()
    if isinstance(value, (dict, list)):
        return "'" + json.dumps(value) + "'::jsonb"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) or value.__class__.__name__ == "Decimal":
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _insert(model: Any, count_sql: str, columns: dict[str, str]) -> str:
    """``INSERT INTO <table> SELECT ... FROM generate_series(1, n) AS i`` setting every concrete column."""
    names, values = [], []
    for field in model._meta.concrete_fields:
        if field.primary_key:
            continue
        names.append(f'"{field.column}"')
        values.append(columns.get(field.column, _literal(field)))
    return (f'INSERT INTO "{model._meta.db_table}" ({", ".join(names)}) '
            f"SELECT {', '.join(values)} FROM generate_series(1, {count_sql}) AS i")


def fill(runs: int) -> None:
    """Fill the database with ``runs`` results on ``runs // 4`` threads, then rebuild the rollups."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from robotlab_django.accounting import rollups
    from robotlab_django.models import RobotResult, Thread

    user_model = get_user_model()
    users = [user_model.objects.get_or_create(username=f"user{index}")[0] for index in range(USERS)]
    ids = "(ARRAY[" + ",".join(str(user.pk) for user in users) + "])"
    threads = max(1, runs // 4)
    robots = "(ARRAY[" + ",".join(f"'{name}'" for name in ROBOTS) + "])"
    models = "(ARRAY[" + ",".join(f"'{name}'" for name in MODELS) + "])"
    moment = "(now() - ((i % 365) || ' days')::interval - ((i % 86000) || ' seconds')::interval)"
    with connection.cursor() as cursor:
        cursor.execute(_insert(Thread, str(threads), {
            "session_id": "md5(i::text) || '-' || i", "robot_name": f"{robots}[1 + i % 4]",
            "user_id": f"CASE WHEN i % 5 = 0 THEN NULL ELSE {ids}[1 + i % {USERS}] END",
            "initial_input": "'Hello there'", "last_user_message": "'How do I reset my password?'",
            "last_user_message_at": moment, "created_at": moment, "updated_at": moment}))
        first = Thread.objects.order_by("pk").values_list("pk", flat=True).first()
        status = "CASE WHEN i % 100 < 3 THEN 'failed' WHEN i % 100 = 3 THEN 'cancelled' ELSE 'completed' END"
        owner = f"((i - 1) % {threads} + 1)"  # the thread's i: its runs start when it does, a second apart
        thread_moment = (f"(now() - (({owner} % 365) || ' days')::interval"
                         f" - (({owner} % 86000) || ' seconds')::interval + ((i / {threads}) || ' seconds')::interval)")
        cursor.execute(_insert(RobotResult, str(runs), {
            "thread_id": f"{first} + (i - 1) % {threads}", "sequence_number": f"(i - 1) / {threads} + 1",
            "robot_name": f"{robots}[1 + ((i - 1) % {threads} + 1) % 4]", "status": status,
            "input": "'How do I reset my password?'", "reply": "'Open Settings, then Security, then Reset.'",
            "model": f"{models}[1 + i % 3]", "input_tokens": "100 + i % 500", "output_tokens": "20 + i % 80",
            "cost": "((100 + i % 500) * 0.00000015 + (20 + i % 80) * 0.0000006)::numeric(14, 8)",
            "duration": "0.5 + (i % 40) / 10.0", "error": "CASE WHEN i % 100 < 3 THEN 'rate limited' ELSE '' END",
            "error_type": "CASE WHEN i % 100 < 3 THEN 'RateLimitError' ELSE '' END",
            "run_id": "md5('run' || i)", "attempts": "1", "created_at": thread_moment, "updated_at": thread_moment,
            "started_at": thread_moment, "finished_at": thread_moment}))
    rollups.rebuild()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def measure(repeat: int, runs: int) -> list[tuple[str, float, int, float]]:
    """``(page, median ms, queries, KB)`` of each admin page."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from robotlab_django.models import RobotResult, Thread

    admin, _created = get_user_model().objects.get_or_create(username="bench-admin", defaults={
        "is_staff": True, "is_superuser": True})
    client = Client()
    client.force_login(admin)
    result = RobotResult.objects.order_by("-pk").values_list("pk", flat=True).first()
    thread = Thread.objects.order_by("-pk").values_list("pk", flat=True).first()
    base = "/admin/robotlab/"
    page = min(50, max(2, runs // 200))  # deep in the list, and within the counted pages
    pages = [
        ("usage 30 days", f"{base}robotresult/usage/?days=30"),
        ("usage 365 days", f"{base}robotresult/usage/?days=365"),
        ("results", f"{base}robotresult/"),
        ("results failed", f"{base}robotresult/?status=failed"),
        ("results robot", f"{base}robotresult/?robot_name=billing"),
        ("results robot+model", f"{base}robotresult/?robot_name=billing&model=gpt-4o-mini"),
        (f"results page {page}", f"{base}robotresult/?p={page}"),
        ("threads", f"{base}thread/"),
        ("threads robot", f"{base}thread/?robot_name=support"),
        ("result page", f"{base}robotresult/{result}/change/"),
        ("thread page", f"{base}thread/{thread}/change/"),
    ]
    figures = []
    for name, url in pages:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        count = len(queries)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
        figures.append((name, statistics.median(times), count, len(response.content) / 1024))
    return figures


def main() -> None:
    """Fill when needed, then time each page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--refill", action="store_true", help="drop the database and fill it again")
    parser.add_argument("--database", default=DATABASE)
    args = parser.parse_args()
    if args.refill:
        import psycopg

        with psycopg.connect(host="127.0.0.1", user=os.environ.get("PGUSER", "postgres"), dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    _setup(args.database)
    from robotlab_django.models import RobotResult

    have = RobotResult.objects.count()
    if have != args.runs:
        if have:
            raise SystemExit(f"{args.database} holds {have} runs, not {args.runs}: pass --refill to start over.")
        started = time.perf_counter()
        fill(args.runs)
        print(f"filled {args.runs:,} runs in {time.perf_counter() - started:.0f} s")
    figures = measure(args.repeat, args.runs)
    print(f"{'page':<22}{'median ms':>10}{'queries':>9}{'KB':>8}")
    for name, ms, queries, size in figures:
        print(f"{name:<22}{ms:>10.1f}{queries:>9}{size:>8.0f}")
    slowest = max(figures, key=lambda item: item[1])
    print(f"admin: runs={args.runs} slowest={slowest[0].replace(' ', '_')} {slowest[1]:.0f} ms "
          f"max_queries={max(item[2] for item in figures)}")


if __name__ == "__main__":
    main()
