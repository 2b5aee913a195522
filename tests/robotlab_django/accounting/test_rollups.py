"""Usage rollups: kept equal to the result rows as runs finish, fail, are cancelled or run networks.

Each test compares the rollups the writes maintained with :func:`rollups.rebuild`'s recount of the rows,
and the admin reads them: capped counts, filter choices and totals, and today's spend per user.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

import robotlab
from robotlab.testing import FakeLLM, text, tool_call
from robotlab.tools import AskUser
from robotlab_django import services
from robotlab_django.accounting import rollups
from robotlab_django.admin import lists as admin_lists
from robotlab_django.models import RobotResult, Status, Thread, UsageRollup
from robotlab_django.registry import registry
from robotlab_django.runs import control

pytestmark = pytest.mark.django_db


def _snapshot() -> list[tuple[Any, ...]]:
    return sorted(UsageRollup.objects.filter(runs__gt=0).values_list(
        "day", "robot_name", "model", "user_id", "runs", "input_tokens", "output_tokens", "cost"))


def _assert_rollups_equal_the_rows() -> list[tuple[Any, ...]]:
    kept = _snapshot()
    rollups.rebuild()
    assert kept == _snapshot()
    return kept


@pytest.fixture
def owner() -> Any:
    return get_user_model().objects.create_user("owner", password="pw")


def test_completed_runs_are_counted_per_day_robot_model_and_user(owner: Any) -> None:
    thread = Thread.objects.create(user=owner)
    services.run_robot(thread, "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    services.run_robot(thread, "echo", "again", llm=FakeLLM([text("hello", usage=(20, 2), cost=0.25)]))
    services.run_robot("anon", "echo", "hi", llm=FakeLLM([text("hello", usage=(5, 5), cost=0.125)]))
    today = dt.date.today()
    assert _assert_rollups_equal_the_rows() == [
        (today, "echo", "fake", "", 1, 5, 5, Decimal("0.125")),
        (today, "echo", "fake", str(owner.pk), 2, 30, 3, Decimal("0.75"))]


def test_failed_runs_are_counted(scripted_llm: Any) -> None:
    scripted_llm()  # no step: the model call fails
    row = services.run_robot("t", "echo", "hi", raise_errors=False)
    assert row.status == Status.FAILED
    assert [(r[1], r[4]) for r in _assert_rollups_equal_the_rows()] == [("echo", 1)]


def test_a_cancelled_run_keeps_the_usage_it_had(scripted_llm: Any, clean_registry: None, owner: Any) -> None:
    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="planner", system_prompt="You pick plans.", local_tools=[AskUser], **options)

    registry.register(build, name="planner", replace=True)
    scripted_llm(tool_call("robot_lab--ask_user", question="Which plan?", usage=(4, 1)))
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = services.run_robot(thread, "planner", "Sign me up", raise_errors=False)
    assert row.status == Status.AWAITING
    control.cancel(row, user=owner)
    row.refresh_from_db()
    assert row.status == Status.CANCELLED and row.input_tokens == 4
    assert [(r[1], r[4], r[5]) for r in _assert_rollups_equal_the_rows()] == [("planner", 1, 4)]


def test_network_turns_count_the_turn_and_each_robot_once(scripted_llm: Any) -> None:
    scripted_llm(text("billing", usage=(10, 1)), text("Refunded.", usage=(20, 5), cost=0.25))
    services.run_robot("s1", "helpdesk", "I was charged twice")
    counted = {(r[1], r[4], r[5], r[6], r[7]) for r in _assert_rollups_equal_the_rows()}
    assert counted == {("helpdesk", 1, 0, 0, Decimal(0)), ("classifier", 1, 10, 1, Decimal(0)),
                       ("billing_agent", 1, 20, 5, Decimal("0.25"))}


def test_update_rows_moves_a_row_between_keys_and_keeps_rows_it_does_not_match() -> None:
    services.run_robot("t", "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    rows = RobotResult.objects.filter(robot_name="echo")
    assert rollups.update_rows(rows, model="other", input_tokens=7) == 1
    assert [(r[2], r[4], r[5]) for r in _assert_rollups_equal_the_rows()] == [("other", 1, 7)]
    from django.db.models import F

    assert rollups.update_rows(rows, output_tokens=F("output_tokens") + 4) == 1  # computed by the database
    assert [(r[5], r[6]) for r in _assert_rollups_equal_the_rows()] == [(7, 5)]
    assert rollups.update_rows(rows.filter(status=Status.FAILED), model="x") == 0
    assert rollups.update_rows(rows, reply="changed") == 1  # no counted column: a plain update


def test_the_data_migration_fills_the_rollups_from_existing_rows() -> None:
    import importlib
    import types

    from django.apps import apps
    from django.db import connection

    services.run_robot("t", "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    kept = _snapshot()
    UsageRollup.objects.all().delete()
    migration = importlib.import_module("robotlab_django.migrations.0008_backfill_rollups")
    migration.backfill(apps, types.SimpleNamespace(connection=connection))
    assert _snapshot() == kept != []


def test_erasing_a_user_folds_their_rollups_into_the_anonymous_ones(owner: Any) -> None:
    thread = Thread.objects.create(user=owner)
    services.run_robot(thread, "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    services.run_robot("anon", "echo", "hi", llm=FakeLLM([text("hello", usage=(5, 5), cost=0.125)]))
    assert rollups.forget_user(owner.pk) == 1
    assert [(r[3], r[4], r[5]) for r in _snapshot()] == [("", 2, 15)]


def test_rows_queued_at_once_are_counted_with_one_statement_and_moved_when_they_finish() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from robotlab_django.runs.records import append_results, save_row

    thread = Thread.objects.create()
    with CaptureQueriesContext(connection) as queries:
        rows = append_results(thread, [{"robot_name": f"branch_{i}"} for i in range(8)])
    writes = [q["sql"] for q in queries.captured_queries if "usagerollup" in q["sql"]]
    assert len(writes) == 1 and "ON CONFLICT" in writes[0]  # eight new keys, one upsert
    append_results(thread, [{"robot_name": "branch_0"}])  # an existing key gains a run
    save_row(rows[0], {"status": Status.COMPLETED, "model": "fake", "input_tokens": 3, "cost": Decimal("0.5")})
    assert [(r[1], r[2], r[4], r[5], r[7]) for r in _assert_rollups_equal_the_rows() if r[1] == "branch_0"] == [
        ("branch_0", "", 1, 0, Decimal(0)), ("branch_0", "fake", 1, 3, Decimal("0.5"))]
    for row in [rows[1], *RobotResult.objects.filter(robot_name="branch_0", model="")]:
        save_row(row, {"status": Status.FAILED, "model": "fake"})
    assert not UsageRollup.objects.filter(model="", robot_name__in=["branch_0", "branch_1"]).exists()  # none left


def test_a_database_without_upserts_counts_the_same_rows_key_by_key(monkeypatch: Any) -> None:
    from django.db import connection

    from robotlab_django.runs.records import append_results, save_row

    monkeypatch.setattr(connection, "vendor", "mysql")  # no ON CONFLICT: update, else get_or_create
    thread = Thread.objects.create()
    rows = append_results(thread, [{"robot_name": "a"}, {"robot_name": "b"}, {"robot_name": "a"}])
    save_row(rows[0], {"status": Status.COMPLETED, "model": "fake", "output_tokens": 2, "cost": Decimal("0.25")})
    assert [(r[1], r[2], r[4], r[6], r[7]) for r in _assert_rollups_equal_the_rows()] == [
        ("a", "", 1, 0, Decimal(0)), ("a", "fake", 1, 2, Decimal("0.25")), ("b", "", 1, 0, Decimal(0))]


def _bulk(count: int, *, robot: str = "echo", status: str = Status.COMPLETED) -> None:
    threads = Thread.objects.bulk_create([Thread() for _ in range(count)])
    RobotResult.objects.bulk_create([
        RobotResult(thread=thread, sequence_number=1, robot_name=robot, status=status, model="fake",
                    input_tokens=10, output_tokens=2, cost=Decimal("0.001")) for thread in threads])
    rollups.rebuild()  # rows written by bulk_create are counted by a rebuild


def test_lists_count_up_to_the_cap_and_total_from_the_rollups_past_it(admin_client: Client,
                                                                        monkeypatch: Any) -> None:
    monkeypatch.setattr(admin_lists, "COUNT_CAP", 5)
    _bulk(4, robot="echo")
    _bulk(4, robot="billing", status=Status.FAILED)
    everything = admin_client.get("/admin/robotlab/robotresult/").content.decode()
    assert "more than 5 robot results" in everything
    assert "Totals of these results: 8 runs, 80 input tokens, 16 output tokens" in everything
    assert "(from the daily usage rollups)" in everything
    echo = admin_client.get("/admin/robotlab/robotresult/?robot_name=echo").content.decode()
    assert "4 robot results" in echo and "Totals of these results: 4 runs" in echo
    assert "(from the daily usage rollups)" not in echo  # within the cap: counted from the rows
    failed = admin_client.get("/admin/robotlab/robotresult/?status=failed&model=fake").content.decode()
    assert "Totals of these results: 4 runs" in failed
    monkeypatch.setattr(admin_lists, "COUNT_CAP", 3)
    failed = admin_client.get("/admin/robotlab/robotresult/?status=failed").content.decode()
    assert "Totals of these results" not in failed and "Totals are not computed" in failed
    threads = admin_client.get("/admin/robotlab/thread/").content.decode()
    assert "more than 3 threads" in threads


def test_filter_choices_come_from_the_rollups(admin_client: Client) -> None:
    _bulk(2, robot="billing")
    UsageRollup.objects.create(day=dt.date.today(), robot_name="<b>only-in-rollups</b>", model="m")
    body = admin_client.get("/admin/robotlab/robotresult/").content.decode()
    assert "?robot_name=billing" in body and "&lt;b&gt;only-in-rollups&lt;/b&gt;" in body
    assert "<b>only-in-rollups</b>" not in body


@pytest.mark.parametrize("url", ["/admin/robotlab/robotresult/", "/admin/robotlab/thread/",
                                 "/admin/robotlab/robotresult/usage/", "/admin/robotlab/robotresult/?status=failed"])
def test_admin_pages_make_as_many_queries_at_3_rows_as_at_30(admin_client: Client, url: str) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    _bulk(3, status=Status.FAILED)
    admin_client.get(url)
    with CaptureQueriesContext(connection) as small:
        assert admin_client.get(url).status_code == 200
    _bulk(27, robot="other", status=Status.FAILED)
    with CaptureQueriesContext(connection) as large:
        assert admin_client.get(url).status_code == 200
    assert len(large) == len(small), url


def test_the_usage_page_lists_todays_spend_per_user_with_the_budget(admin_client: Client, owner: Any,
                                                                    settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "BUDGETS": {"USER_TOKENS": 5000}}
    thread = Thread.objects.create(user=owner)
    services.run_robot(thread, "echo", "hi", llm=FakeLLM([text("hello", usage=(100, 20), cost=0.5)]))
    body = admin_client.get("/admin/robotlab/robotresult/usage/").content.decode()
    assert "Spend per user today" in body
    assert "<tr><td>owner</td><td>1</td><td>120</td>" in body.replace("\n        ", "")
    assert "<td>5000</td>" in body and "echo · fake" in body


def test_the_rebuild_command_recounts_and_names_a_bad_date() -> None:
    import io

    from django.core.management import CommandError, call_command

    services.run_robot("t", "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    kept = _snapshot()
    UsageRollup.objects.all().delete()
    out = io.StringIO()
    call_command("robotlab_rollups", stdout=out)
    assert out.getvalue() == "Rebuilt 1 usage rollup row(s) for every day.\n" and _snapshot() == kept
    call_command("robotlab_rollups", "--since", dt.date.today().isoformat(), stdout=out)
    assert _snapshot() == kept
    with pytest.raises(CommandError, match="--since must be a date as YYYY-MM-DD, got 'yesterday'"):
        call_command("robotlab_rollups", "--since", "yesterday")


def test_the_usage_chart_escapes_robot_and_model_names(admin_client: Client) -> None:
    hostile = "<script>alert('x')</script>"
    UsageRollup.objects.create(day=dt.date.today(), robot_name=hostile, model='"><img src=x onerror=alert(1)>',
                               runs=1, input_tokens=10, output_tokens=1, cost=Decimal("0.5"))
    body = admin_client.get("/admin/robotlab/robotresult/usage/?days=7").content.decode()
    assert "<rect" in body and "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in body
    assert hostile not in body and "<img src=x" not in body


def test_names_written_by_the_upsert_are_bound_as_parameters_and_escaped_on_the_usage_page(
        admin_client: Client) -> None:
    from robotlab_django.runs.records import append_results, save_row

    robot, model = "<script>alert('r')</script>'); DROP TABLE x; --", '"><img src=x onerror=alert(1)>'
    [row] = append_results(Thread.objects.create(), [{"robot_name": robot}])  # counted by the raw ON CONFLICT upsert
    save_row(row, {"status": Status.COMPLETED, "model": model, "input_tokens": 5, "cost": Decimal("0.5")})
    assert [(r[1], r[2], r[4]) for r in _assert_rollups_equal_the_rows()] == [(robot, model, 1)]  # stored verbatim
    body = admin_client.get("/admin/robotlab/robotresult/usage/?days=7").content.decode()
    assert "<rect" in body and "&lt;script&gt;alert(&#x27;r&#x27;)&lt;/script&gt;" in body
    assert "<script>alert" not in body and "<img src=x" not in body


def test_a_row_whose_values_the_caller_read_moves_its_usage_with_one_update_else_as_update_rows_does() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from robotlab_django.runs.records import append_results, save_row

    thread = Thread.objects.create()
    first, second = append_results(thread, [{"robot_name": "branch"}, {"robot_name": "branch"}])
    with CaptureQueriesContext(connection) as queries:
        assert save_row(first, {"status": Status.COMPLETED, "model": "fake", "input_tokens": 3}, savepoint=False,
                        thread_user=None)
    statements = [q["sql"] for q in queries.captured_queries if q["sql"].split()[0] in ("SELECT", "UPDATE")]
    assert [sql.split()[0] for sql in statements if "robotlab_robotresult" in sql] == ["UPDATE"]  # no read, no lock
    RobotResult.objects.filter(pk=second.pk).update(input_tokens=5)  # changed since the caller read it
    save_row(second, {"status": Status.COMPLETED, "model": "fake", "input_tokens": 7}, thread_user=None)
    assert [(r[2], r[4], r[5]) for r in _assert_rollups_equal_the_rows()] == [("fake", 2, 10)]


def test_a_key_left_with_no_run_goes_in_one_statement() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from robotlab_django.runs.records import append_results, save_row

    thread = Thread.objects.create()
    [row] = append_results(thread, [{"robot_name": "solo"}])
    with CaptureQueriesContext(connection) as queries:
        save_row(row, {"status": Status.COMPLETED, "model": "fake"}, thread_user=None)
    writes = [q["sql"].split()[0] for q in queries.captured_queries if "usagerollup" in q["sql"]]
    assert writes == ["DELETE", "INSERT"]  # its '' key dropped at once, its model's counted
    assert [(r[2], r[4]) for r in _assert_rollups_equal_the_rows()] == [("fake", 1)]
