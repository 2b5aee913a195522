"""Daily budgets per user and per robot, and network budgets, with the ledger in the database (issue 15, 6-7).

They run on the suite's database (SQLite, and PostgreSQL in the ``ROBOTLAB_TEST_DB=postgres`` pass, which
``test_the_budget_tests_pass_on_postgres`` runs from the SQLite pass); the race starts two real worker
processes on one database (a SQLite file, or the PostgreSQL test database).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from robotlab import build
from robotlab.errors import BudgetExceeded
from robotlab.network import create_network
from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.budgets import DatabaseLedger
from robotlab_django.models import BudgetLedger
from tests.robotlab_django import budget_racer
from tests.robotlab_django.pg import postgres_unreachable

ROOT = Path(__file__).resolve().parents[2]


def _budgets(settings: Any, **values: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "BUDGETS": values}


@pytest.mark.django_db(transaction=True)
def test_a_users_daily_token_budget_refuses_runs_once_spent(settings: Any) -> None:
    _budgets(settings, USER_TOKENS=100, RESERVE_TOKENS=60)
    user = get_user_model().objects.create_user("ann")
    llm = FakeLLM(default=text("ok", usage=(30, 30)))
    first = services.run_robot("t1", "echo", "hi", user=user, llm=llm)
    assert first.status == "completed"
    second = services.run_robot("t1", "echo", "again", user=user, llm=llm)  # 60 of 100 used: admitted
    assert second.status == "completed"
    third = services.run_robot("t1", "echo", "more", user=user, llm=llm, raise_errors=False)
    assert third.status == "failed"
    assert third.error_type == "BudgetExceeded"
    assert third.error == "Your daily budget is spent (120 of 100 tokens used today); it renews tomorrow."
    assert len(llm.requests) == 2  # the refused run never called the model
    row = BudgetLedger.objects.get(scope=f"user:{user.pk}")
    assert (row.consumed_tokens, row.reserved_tokens) == (120, 0)
    other = get_user_model().objects.create_user("bob")
    assert services.run_robot("t2", "echo", "hi", user=other, llm=llm).status == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_robots_daily_cost_budget_covers_every_user(settings: Any) -> None:
    _budgets(settings, ROBOT_COST=0.05, RESERVE_COST=0.01)
    llm = FakeLLM(default=text("ok", usage=(1, 1), cost=0.03))
    assert services.run_robot("a", "echo", "hi", llm=llm).status == "completed"
    assert services.run_robot("b", "echo", "hi", llm=llm).status == "completed"
    refused = services.run_robot("c", "echo", "hi", llm=llm, raise_errors=False)
    assert refused.error == "The daily budget of robot 'echo' is spent ($0.06 of $0.05 used today); it renews tomorrow."


@pytest.mark.django_db(transaction=True)
def test_the_chat_page_shows_the_budget_message(settings: Any, client: Any) -> None:
    from robotlab_django.user_errors import public_error

    message = "Your daily budget is spent (120 of 100 tokens used today); it renews tomorrow."
    assert public_error("BudgetExceeded", message) == ("BudgetExceeded", message)


@pytest.mark.django_db(transaction=True)
def test_no_budgets_no_ledger_rows(settings: Any) -> None:
    _budgets(settings)
    services.run_robot("a", "echo", "hi", llm=FakeLLM(default=text("ok")))
    assert not BudgetLedger.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_network_budget_in_the_database_covers_every_task() -> None:
    llms = [FakeLLM(default=text("ok", usage=(20, 20))) for _ in range(3)]
    network = create_network(name="chain", config={"token_budget": 50})
    network.task("a", build(name="a", llm=llms[0]))
    network.task("b", build(name="b", llm=llms[1]), depends_on="a")
    network.task("c", build(name="c", llm=llms[2]), depends_on="b")
    assert network.budget is not None
    import datetime as dt

    network.budget.ledger = DatabaseLedger(scope="network:turn-1", day=dt.date(2026, 1, 1),
                                           limits=network.budget.ledger.limits)
    with pytest.raises(BudgetExceeded, match=r"^Token budget exceeded: 80 tokens used, budget is 50$"):
        network.run("go")
    assert len(llms[2].requests) == 0
    row = BudgetLedger.objects.get(scope="network:turn-1")
    assert (row.consumed_tokens, row.reserved_tokens) == (80, 0)
    # another worker's copy of the network (same scope) is refused before any call, with the seed's message
    again = create_network(name="chain", config={"token_budget": 50})
    again.task("a", build(name="a", llm=llms[2]))
    assert again.budget is not None
    again.budget.ledger = DatabaseLedger(scope="network:turn-1", day=dt.date(2026, 1, 1), limits={"tokens": 50})
    with pytest.raises(BudgetExceeded, match=r"^budget exceeded for tokens: 80 > 50$"):
        again.run("go")
    assert len(llms[2].requests) == 0


def _database_env(tmp_path: Path) -> dict[str, str]:
    """Environment that points a child process at the database this test uses."""
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        url = f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        return {"ROBOTLAB_TEST_DB": "postgres", "ROBOTLAB_TEST_DATABASE_URL": url}
    path = str(tmp_path / "race.sqlite3")
    env = {"ROBOTLAB_TEST_DB": "sqlite", "ROBOTLAB_TEST_SQLITE_PATH": path}
    subprocess.run([sys.executable, "-m", "django", "migrate", "-v0"], cwd=ROOT, check=True, timeout=120,
                   env={**os.environ, **env, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings"})
    return env


@pytest.mark.django_db(transaction=True)
def test_two_worker_processes_racing_for_the_last_tokens(tmp_path: Path, monkeypatch: Any) -> None:
    limit, per_run = 1_000, 30
    setting = {"USER_TOKENS": limit, "RESERVE_TOKENS": per_run}
    for key, value in _database_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(2), context.Queue()
    racers = [context.Process(target=budget_racer.race, args=(barrier, results, setting, 7, per_run))
              for _ in range(2)]
    for racer in racers:
        racer.start()
    outcomes = [results.get(timeout=120) for _ in racers]
    for racer in racers:
        racer.join(timeout=60)
    counts = [runs for _pid, runs in outcomes]
    assert all(isinstance(runs, int) for runs in counts), outcomes
    assert len({pid for pid, _ in outcomes}) == 2
    if connection.vendor == "postgresql":
        row = BudgetLedger.objects.get(scope="user:7")
        consumed, reserved = row.consumed_tokens, row.reserved_tokens
    else:
        import sqlite3

        with sqlite3.connect(str(tmp_path / "race.sqlite3")) as db:
            consumed, reserved = db.execute("SELECT consumed_tokens, reserved_tokens FROM robotlab_budgetledger "
                                            "WHERE scope = 'user:7'").fetchone()
    assert consumed == sum(counts) * per_run
    assert reserved == 0
    # the budget is reached, and passed by less than one run's reservation
    assert limit <= consumed < limit + per_run


def test_the_budget_tests_pass_on_postgres() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("already running on PostgreSQL")
    user = os.environ.get("PGUSER", "postgres")
    reason = postgres_unreachable({"HOST": "127.0.0.1", "PORT": 5432, "USER": user})
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "ROBOTLAB_TEST_DB": "postgres"}
    process = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not on_postgres"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout + process.stderr
    assert " passed" in process.stdout and "skipped" not in process.stdout, process.stdout

