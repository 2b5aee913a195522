"""Daily budgets per user and per robot, and network budgets, with the ledger in the database (issue 15, 6-7).

They run on the suite's database (SQLite, and PostgreSQL in the ``ROBOTLAB_TEST_DB=postgres`` pass, which
``test_the_budget_tests_pass_on_postgres`` runs from the SQLite pass); the race starts two real worker
processes on one database (a SQLite file, or the PostgreSQL test database).
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction

from robotlab import build
from robotlab.errors import BudgetExceeded
from robotlab.network import create_network
from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.accounting import budgets
from robotlab_django.accounting.budgets import DatabaseLedger
from robotlab_django.models import BudgetLedger, BudgetReservation
from tests.robotlab_django import budget_racer
from tests.robotlab_django.pg import postgres_unreachable

ROOT = Path(__file__).resolve().parents[3]


def _budgets(settings: Any, **values: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "BUDGETS": values}


@pytest.mark.django_db(transaction=True)
def test_a_users_daily_token_budget_refuses_runs_once_spent(settings: Any) -> None:
    # each call reserves its prompt (about 25 tokens here) plus RESERVE_TOKENS, and uses 120: an estimate error
    _budgets(settings, USER_TOKENS=100, RESERVE_TOKENS=10)
    user = get_user_model().objects.create_user("ann")
    llm = FakeLLM(default=text("ok", usage=(60, 60)))
    first = services.run_robot("t1", "echo", "hi", user=user, llm=llm)
    assert first.status == "completed"
    third = services.run_robot("t1", "echo", "more", user=user, llm=llm, raise_errors=False)
    assert third.status == "failed"
    assert third.error_type == "BudgetExceeded"
    assert third.error == "Your daily budget is spent (120 of 100 tokens used today); it renews tomorrow."
    assert len(llm.requests) == 1  # the refused run never called the model
    row = BudgetLedger.objects.get(scope=f"user:{user.pk}")
    assert (row.consumed_tokens, row.reserved_tokens) == (120, 0)
    other = get_user_model().objects.create_user("bob")
    assert services.run_robot("t2", "echo", "hi", user=other, llm=llm).status == "completed"


@pytest.mark.django_db(transaction=True)
def test_every_model_call_reserves_its_estimate_and_one_that_does_not_fit_is_refused(settings: Any) -> None:
    """One run of many calls stops at the call that would pass the limit, not after it (issue 25, item 2)."""
    from robotlab.testing import tool_call

    _budgets(settings, USER_TOKENS=1_000, RESERVE_TOKENS=10)
    user = get_user_model().objects.create_user("ann")
    calls = [tool_call("add", a=n, b=1, usage=(100, 100)) for n in range(9)]
    llm = FakeLLM([*calls, text("done", usage=(100, 100))])
    row = services.run_robot("t1", "calculator", "count", user=user, llm=llm, raise_errors=False)
    assert row.error_type == "BudgetExceeded"
    # each call reserves its prompt (about 230 to 290 tokens with the tool's schema) plus 10, and uses 200:
    # 4 calls were admitted; the 5th did not fit beside 800 (the run used to go on to its 10th)
    assert len(llm.requests) == 4
    ledger = BudgetLedger.objects.get(scope=f"user:{user.pk}")
    assert (ledger.consumed_tokens, ledger.reserved_tokens) == (800, 0)
    assert row.error.startswith("Your daily budget has too little left (800 of 1000 tokens used today; "
                                "the next call needs up to ")
    assert row.error.endswith(" tokens); it renews tomorrow.")
    assert not BudgetReservation.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_refusal_names_what_calls_in_progress_reserved(settings: Any) -> None:
    """A call refused because of other calls' reservations says so, with both figures (issue 25, item 5)."""
    from robotlab_django.accounting import budgets

    _budgets(settings, USER_TOKENS=10_000)
    scopes = budgets.daily_scopes(7, "echo")
    held = budgets.reserve_call(scopes, owner="other-run", tokens=4_000, cost=0)
    budgets.settle_call(budgets.reserve_call(scopes, owner="done-run", tokens=5_000, cost=0), tokens=5_000, cost=0)
    with pytest.raises(BudgetExceeded) as refused:
        budgets.reserve_call(scopes, owner="late-run", tokens=2_000, cost=0)
    assert str(refused.value) == (
        "Your daily budget has too little left (5000 of 10000 tokens used today, 4000 tokens more reserved by "
        "calls in progress; the next call needs up to 2000 tokens); try again when those calls end, or tomorrow.")
    assert refused.value.scope == "user:7"
    budgets.reserve_call(scopes, owner="x", tokens=1_000, cost=0)  # fits exactly: 5000 + 4000 + 1000
    with pytest.raises(BudgetExceeded) as spent:  # a new run is refused before it starts, saying why
        budgets.admit_run(scopes)
    assert str(spent.value) == (
        "Your daily budget has too little left (5000 of 10000 tokens used today, 5000 tokens more reserved by "
        "calls in progress); try again when those calls end, or tomorrow.")
    assert budgets.release_run("x") == 1
    budgets.settle_call(held, tokens=0, cost=0)
    row = BudgetLedger.objects.get(scope="user:7")
    assert (row.consumed_tokens, row.reserved_tokens) == (5_000, 0)


@pytest.mark.django_db(transaction=True)
def test_a_distributed_network_turn_reserves_and_counts_every_call(settings: Any, scripted_llm: Any) -> None:
    """Each task of a distributed turn reserves per call in the user's and the network's daily budgets; a spent
    budget refuses the next turn before any task runs (issue 25, item 1)."""
    from robotlab_django.models import RobotResult
    from robotlab_django.runs import executor
    from robotlab_django.runs.records import start_run

    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True,
                         "BUDGETS": {"USER_TOKENS": 1_000, "ROBOT_TOKENS": 10_000, "RESERVE_TOKENS": 10}}
    user = get_user_model().objects.create_user("ann")
    llm = scripted_llm(text("billing", usage=(300, 100)), text("Refunded.", usage=(400, 200)))
    turn = start_run(services.get_thread(None, user=user), "helpdesk", "I was charged twice")
    executor.dispatch(turn)
    turn.refresh_from_db()
    assert turn.status == "completed"
    assert len(llm.requests) == 2
    used = {row.scope: (row.consumed_tokens, row.reserved_tokens) for row in BudgetLedger.objects.all()}
    assert used == {f"user:{user.pk}": (1_000, 0), "robot:helpdesk": (1_000, 0)}
    assert not BudgetReservation.objects.exists()
    again = start_run(services.get_thread(None, user=user), "helpdesk", "And again")
    executor.dispatch(again)
    again.refresh_from_db()
    assert (again.status, again.error_type) == ("failed", "BudgetExceeded")
    assert again.error == "Your daily budget is spent (1000 of 1000 tokens used today); it renews tomorrow."
    assert len(llm.requests) == 2 and not RobotResult.objects.filter(parent_id=again.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_distributed_task_refused_at_its_call_fails_its_turn(settings: Any, scripted_llm: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True,
                         "BUDGETS": {"ROBOT_TOKENS": 420, "RESERVE_TOKENS": 10}}
    llm = scripted_llm(text("billing", usage=(300, 100)), text("Refunded.", usage=(400, 200)))
    from robotlab_django.runs import executor
    from robotlab_django.runs.records import start_run

    turn = start_run("t1", "helpdesk", "I was charged twice")
    executor.dispatch(turn)
    turn.refresh_from_db()
    assert (turn.status, turn.error_type) == ("failed", "BudgetExceeded")
    assert "The daily budget of robot 'helpdesk' has too little left (400 of 420 tokens used today" in turn.error
    assert len(llm.requests) == 1  # the second task's call did not fit beside 400
    row = BudgetLedger.objects.get(scope="robot:helpdesk")
    assert (row.consumed_tokens, row.reserved_tokens) == (400, 0)


@pytest.mark.django_db(transaction=True)
def test_the_requeue_command_and_the_expiry_release_a_lost_runs_reservations(settings: Any,
                                                                            scripted_llm: Any) -> None:
    """What a run whose worker died reserved is freed by robotlab_requeue_stuck, or after RESERVATION_TTL (item 3)."""
    import datetime as dt

    from django.utils import timezone

    from robotlab_django.accounting import budgets
    from robotlab_django.models import RobotResult
    from robotlab_django.runs import executor

    scripted_llm(text("recovered", usage=(10, 10)))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "RUN_LEASE": 600,
                         "BUDGETS": {"USER_TOKENS": 10_000, "RESERVE_TOKENS": 100, "RESERVATION_TTL": 3_600}}
    user = get_user_model().objects.create_user("ann")
    lost = services.start_run(services.get_thread(None, user=user), "echo", "Hi")
    scopes = budgets.daily_scopes(user.pk, "echo")
    budgets.reserve_call(scopes, owner=lost.pk, tokens=4_000, cost=0)  # its worker died in this call
    long_ago = timezone.now() - dt.timedelta(minutes=60)
    RobotResult.objects.filter(pk=lost.pk).update(status="running", attempts=1, started_at=long_ago,
                                                  updated_at=long_ago)
    assert executor.requeue_stuck() == ([lost.pk], [])
    ledger = BudgetLedger.objects.get(scope=f"user:{user.pk}")
    assert (ledger.consumed_tokens, ledger.reserved_tokens) == (20, 0)  # only the rerun's call
    assert not BudgetReservation.objects.exists()

    budgets.reserve_call(scopes, owner="gone", tokens=4_000, cost=0)
    BudgetReservation.objects.update(created_at=timezone.now() - dt.timedelta(seconds=3_601))
    budgets.settle_call(budgets.reserve_call(scopes, owner="next", tokens=100, cost=0), tokens=50, cost=0)
    ledger.refresh_from_db()
    assert (ledger.consumed_tokens, ledger.reserved_tokens) == (70, 0)
    assert not BudgetReservation.objects.exists()


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
    from robotlab_django.runs.user_errors import public_error

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
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k",
         "not on_postgres and not on_sqlite"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout + process.stderr
    assert " passed" in process.stdout and "skipped" not in process.stdout, process.stdout



@pytest.mark.django_db(transaction=True)
def test_on_sqlite_a_ledger_call_the_database_refuses_for_a_moment_is_tried_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another connection holds the ledger's table (SQLite's in-memory test database answers 'database table is
    locked' at once): the reservation is tried again once the lock is gone, instead of failing the model call (a
    distributed turn's reducer failed so under load, its reply 'Error: OperationalError: ...')."""
    if connection.vendor != "sqlite":
        pytest.skip("PostgreSQL waits for a row lock instead of refusing the statement")
    held, release, tries = threading.Event(), threading.Event(), []
    BudgetLedger.objects.create(scope="network:turn-1", day=dt.date(2026, 1, 1))

    def holder() -> None:
        try:
            with transaction.atomic():
                BudgetLedger.objects.filter(scope="network:turn-1").update(consumed_tokens=5)
                held.set()
                release.wait(10)
        finally:
            connections.close_all()

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)

    def wait_for_the_lock(seconds: float) -> None:  # the retry's pause: the other connection commits meanwhile
        tries.append(seconds)
        release.set()
        thread.join(10)

    monkeypatch.setattr(budgets, "sleep", wait_for_the_lock)
    ledger = DatabaseLedger(scope="network:turn-1", day=dt.date(2026, 1, 1), limits={"tokens": 100})
    try:
        ledger.reserve("tokens", 40)
    finally:
        release.set()
        thread.join(10)
    assert tries == [budgets.BACKOFF]  # refused once, then reserved
    row = BudgetLedger.objects.get(scope="network:turn-1")
    assert (row.consumed_tokens, row.reserved_tokens) == (5, 40)
