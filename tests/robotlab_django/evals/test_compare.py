"""Two eval runs compared: worse cases first, score, cost and latency deltas; the admin's action and GET-only page."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from robotlab_django.evals.compare import compare_runs
from robotlab_django.models import EvalCase, EvalCaseResult, EvalRun, EvalSet

pytestmark = pytest.mark.django_db

PAYLOAD = "<script>alert('x')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;"
URL = "/admin/robotlab/evalrun/"


def _run(eval_set: EvalSet, scores: dict[EvalCase, tuple[float, float, str]], *, age_days: int) -> EvalRun:
    """An eval run whose case results have (score, latency, cost) each."""
    run = EvalRun.objects.create(eval_set=eval_set, robot_name="echo", cases=len(scores),
                                 passed=sum(score >= 0.5 for score, _latency, _cost in scores.values()),
                                 score=sum(score for score, _l, _c in scores.values()) / len(scores),
                                 cost=sum((Decimal(cost) for _s, _l, cost in scores.values()), Decimal(0)),
                                 input_tokens=100, output_tokens=10 * len(scores), duration=float(age_days + 1))
    EvalRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - dt.timedelta(days=age_days))
    for case, (score, latency, cost) in scores.items():
        EvalCaseResult.objects.create(eval_run=run, case=case, score=score, latency=latency, cost=Decimal(cost),
                                      scores=[{"kind": "contains", "score": score,
                                               "reason": "ok" if score >= 1 else f"missing {case.name!r}"}])
    run.refresh_from_db()
    return run


@pytest.fixture
def runs() -> tuple[EvalRun, EvalRun]:
    """A baseline and a newer run: 'refund' drops 1 -> 0, 'hours' drops 1 -> 0.5, 'greet' same, PAYLOAD better."""
    eval_set = EvalSet.objects.create(name="support")
    refund, hours, greet, hostile, gone = (EvalCase.objects.create(eval_set=eval_set, name=name, input="?")
                                           for name in ("refund", "hours", "greet", PAYLOAD, "gone"))
    base = _run(eval_set, {refund: (1.0, 1.0, "0.001"), hours: (1.0, 2.0, "0.002"), greet: (1.0, 1.0, "0.001"),
                           hostile: (0.0, 3.0, "0.003"), gone: (1.0, 1.0, "0.001")}, age_days=2)
    new = _run(eval_set, {refund: (0.0, 1.5, "0.002"), hours: (0.5, 1.0, "0.002"), greet: (1.0, 1.0, "0.001"),
                          hostile: (1.0, 2.0, "0.001")}, age_days=1)
    return base, new


def test_the_cases_that_got_worse_come_first_the_biggest_drop_first(runs: tuple[EvalRun, EvalRun]) -> None:
    comparison = compare_runs(*runs)
    assert [(row.name, row.change) for row in comparison.rows] == [
        ("refund", "worse"), ("hours", "worse"), ("gone", "removed"), ("greet", "same"), (PAYLOAD, "better")]
    assert comparison.counts == {"worse": 2, "better": 1, "same": 1, "added": 0, "removed": 1}


def test_each_case_and_the_runs_have_their_score_cost_and_latency_deltas(runs: tuple[EvalRun, EvalRun]) -> None:
    comparison = compare_runs(*runs)
    refund, hours, gone = comparison.rows[0], comparison.rows[1], comparison.rows[2]
    assert (refund.score_delta, refund.cost_delta, refund.latency_delta) == (-1.0, Decimal("0.001"), 0.5)
    assert (hours.score_delta, hours.cost_delta, hours.latency_delta) == (-0.5, Decimal(0), -1.0)
    assert (gone.score_delta, gone.cost_delta, gone.latency_delta) == (None, None, None)
    assert comparison.score_delta == pytest.approx(0.625 - 0.8)
    assert comparison.cost_delta == Decimal("0.006") - Decimal("0.008")
    assert comparison.latency_delta == pytest.approx(5.5 / 4 - 8.0 / 5)
    assert (comparison.passed_delta, comparison.tokens_delta, comparison.duration_delta) == (-1, -10, -1.0)


def test_the_action_opens_the_comparison_older_run_first(admin_client: Client, runs: tuple[EvalRun, EvalRun]) -> None:
    base, new = runs
    response = admin_client.post(URL, {"action": "compare_runs", "_selected_action": [new.pk, base.pk]})
    assert response.status_code == 302
    assert response["Location"] == f"{URL}compare/?base={base.pk}&other={new.pk}"
    one = admin_client.post(URL, {"action": "compare_runs", "_selected_action": [new.pk]}, follow=True)
    assert "Select exactly two eval runs." in one.content.decode()


def test_the_page_shows_totals_a_chart_and_the_cases_worse_first_escaped(admin_client: Client,
                                                                        runs: tuple[EvalRun, EvalRun]) -> None:
    base, new = runs
    response = admin_client.get(f"{URL}compare/?base={base.pk}&other={new.pk}")
    page = response.content.decode()
    assert response.status_code == 200
    assert PAYLOAD not in page
    assert page.count(ESCAPED) >= 3  # the table's cell, the chart's label and its tooltip
    start = page.index('<svg class="robotlab-chart"')
    svg = page[start:page.index("</svg>", start)]
    assert "<script" not in svg and ESCAPED in svg and "refund" in svg
    table = page[page.index('id="robotlab-compare-cases"'):]
    order = [table.index(name) for name in ("refund", "hours", "gone", "greet", ESCAPED)]
    assert order == sorted(order)
    assert re.search(r'<tr class="robotlab-worse">\s*<td>refund</td>.*?-1\.00', table, re.DOTALL)
    assert "+$0.001000" in table and "-$0.002000" in page  # the refund's cost delta; the runs' cost delta
    assert "missing &#x27;refund&#x27;" in table  # why the new run lost points
    assert f"#{base.pk} echo (code): missing &quot;{ESCAPED}&quot;" in table  # better now: why the old one had
    assert "2 worse, 1 better, 1 unchanged, 0 added, 1 removed" in page
    assert f'href="{URL}{base.pk}/change/"' in page


def test_the_page_answers_get_only(admin_client: Client, runs: tuple[EvalRun, EvalRun]) -> None:
    base, new = runs
    assert admin_client.post(f"{URL}compare/?base={base.pk}&other={new.pk}").status_code == 405
    assert admin_client.get(f"{URL}compare/?base={base.pk}&other=nope").status_code == 404
    assert admin_client.get(f"{URL}compare/?base={base.pk}&other=999999").status_code == 404


def test_the_page_needs_the_view_permission_on_eval_runs(runs: tuple[EvalRun, EvalRun]) -> None:
    base, new = runs
    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)
    url = f"{URL}compare/?base={base.pk}&other={new.pk}"
    assert client.get(url).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_evalrun"))
    assert client.get(url).status_code == 200
    assert Client().get(url).status_code == 302  # anonymous: to the login page


def test_a_run_page_links_to_the_comparison_with_the_run_before(admin_client: Client,
                                                                runs: tuple[EvalRun, EvalRun]) -> None:
    base, new = runs
    page = admin_client.get(f"{URL}{new.pk}/change/").content.decode()
    assert f"compare/?base={base.pk}&amp;other={new.pk}" in page
