"""The admin's trace pages: how long a 1 -> 8 -> 1 network turn's page takes with its waterfall, and its queries.

Makes a distributed 1 -> 8 -> 1 turn as the app stores it (``tests/robotlab_django/admin/trace_turn.py``: the turn's
row, ten task rows with their transcripts, 47 spans over two workers) beside ``--others`` more turns (their spans
fill the span table, so a page that read more than its own would show it), then fetches, as a superuser with
Django's test client, the turn's page (the waterfall of all its tasks' spans, the transcript, the task graph, the
steps inline), one task's page and the thread's page ``--repeat`` times each, and prints the median ms, the number
of queries and the page's size; the waterfall alone (:func:`robotlab_django.admin.traces.run_trace` and its SVG)
is timed too. Issue 28's target: the turn's page within 200 ms.

SQLite (a file in a temporary folder) by default; ``--postgres`` uses ``robotlab_waterfall_bench`` on
127.0.0.1:5432, made afresh. The last line reads
``admin_waterfall: spans=47 turn_page=<ms> ms queries=<q> waterfall=<ms> ms``.

    .venv/bin/python benchmarks/admin_waterfall.py [--repeat 20] [--others 100] [--postgres]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATABASE = "robotlab_waterfall_bench"


def _setup(postgres: bool, folder: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.robotlab_django.settings"
    if postgres:
        import psycopg

        user = os.environ.get("PGUSER", "postgres")
        with psycopg.connect(host="127.0.0.1", user=user, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{DATABASE}"')
        os.environ.update(ROBOTLAB_TEST_DB="postgres",
                          ROBOTLAB_TEST_DATABASE_URL=f"postgres://{user}@127.0.0.1:5432/{DATABASE}")
    else:
        os.environ.update(ROBOTLAB_TEST_DB="sqlite", ROBOTLAB_TEST_SQLITE_PATH=str(Path(folder) / "bench.sqlite3"))
    import django

    django.setup()
    from django.core.management import call_command
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    # a connection kept across requests, as a site with CONN_MAX_AGE has (and the queries stay countable)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    call_command("migrate", verbosity=0)


def _median_ms(call: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measure(repeat: int, others: int) -> tuple[int, list[tuple[str, float, int, float]]]:
    """The turn's span count, and ``(page, median ms, queries, KB)`` of each page and of the waterfall alone."""
    from django.contrib.auth import get_user_model
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from robotlab_django.admin.traces import run_trace
    from robotlab_django.models import RunSpan
    from tests.robotlab_django.admin.trace_turn import make_turn

    for index in range(others):
        make_turn(8, session=f"other-{index}")
    turn = make_turn(8, session="measured")
    spans = RunSpan.objects.filter(result__in=[turn.row.pk, *(row.pk for row in turn.tasks.values())]).count()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    admin = get_user_model().objects.create_superuser("bench-admin", "bench@example.com", "bench")
    client = Client()
    client.force_login(admin)
    pages = [("turn page", reverse("admin:robotlab_robotresult_change", args=[turn.row.pk])),
             ("task page", reverse("admin:robotlab_robotresult_change", args=[turn.tasks["branch_3"].pk])),
             ("thread page", reverse("admin:robotlab_thread_change", args=[turn.row.thread_id]))]
    figures = []
    for name, url in pages:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        assert name != "turn page" or response.content.count(b'class="span ') == spans, "not every span drawn"
        reset_queries()  # as each request does: the count starts from an empty log
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        count = len(queries)  # read now: the next request empties the log it reads
        figures.append((name, _median_ms(lambda url=url: client.get(url), repeat), count,
                        len(response.content) / 1024))

    def chart() -> str:
        return str(run_trace(turn.row, lambda pk: f"/admin/robotlab/robotresult/{pk}/change/").svg())

    with CaptureQueriesContext(connection) as queries:
        size = len(chart())
    count = len(queries)
    figures.append(("waterfall alone", _median_ms(chart, repeat), count, size / 1024))
    return spans, figures


def main() -> None:
    """Make the turns, then time the pages."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--others", type=int, default=100, help="other 1 -> 8 -> 1 turns in the tables")
    parser.add_argument("--postgres", action="store_true", help=f"PostgreSQL ({DATABASE}) instead of SQLite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        _setup(args.postgres, folder)
        from django.db import connection

        spans, figures = measure(args.repeat, args.others)
        print(f"database: {connection.vendor}; {args.others + 1} turns of 1 -> 8 -> 1, {spans} spans in the measured "
              "one")
        print(f"{'page':<18}{'median ms':>10}{'queries':>9}{'KB':>8}")
        for name, ms, queries, size in figures:
            print(f"{name:<18}{ms:>10.1f}{queries:>9}{size:>8.0f}")
        turn, alone = figures[0], figures[-1]
        print(f"admin_waterfall: spans={spans} turn_page={turn[1]:.0f} ms queries={turn[2]} "
              f"waterfall={alone[1]:.1f} ms")
        connection.close()


if __name__ == "__main__":
    main()
