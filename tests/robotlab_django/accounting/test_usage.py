"""Daily usage by robot and model, and the chart geometry."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from django.utils import timezone

from robotlab_django.accounting.usage import daily_usage
from robotlab_django.models import RobotResult, Thread

pytestmark = pytest.mark.django_db

TODAY = dt.date(2026, 3, 10)


def _row(thread: Thread, number: int, day: dt.date, robot: str, model: str, tokens: int, cost: str) -> None:
    row = RobotResult.objects.create(thread=thread, sequence_number=number, robot_name=robot, model=model,
                                     input_tokens=tokens, output_tokens=0, cost=Decimal(cost))
    moment = dt.datetime.combine(day, dt.time(12), tzinfo=timezone.get_current_timezone())
    RobotResult.objects.filter(pk=row.pk).update(created_at=moment)


def test_usage_is_grouped_by_day_robot_and_model() -> None:
    thread = Thread.objects.create()
    _row(thread, 1, TODAY, "support", "gpt", 100, "0.10")
    _row(thread, 2, TODAY, "support", "gpt", 50, "0.05")
    _row(thread, 3, TODAY - dt.timedelta(days=1), "billing", "claude", 300, "0.30")
    _row(thread, 4, TODAY - dt.timedelta(days=40), "support", "gpt", 999, "9")  # outside the period
    report = daily_usage(RobotResult.objects.all(), days=7, end=TODAY)
    assert (report.start, report.end, len(report.days)) == (TODAY - dt.timedelta(days=6), TODAY, 7)
    assert [(s.robot_name, s.model, s.runs, s.total_tokens, s.cost) for s in report.series] == [
        ("billing", "claude", 1, 300, Decimal("0.30")), ("support", "gpt", 2, 150, Decimal("0.15"))]
    assert (report.total_runs, report.total_tokens, report.total_cost) == (3, 450, Decimal("0.45"))
    rects = report.tokens_chart.rects
    assert len(rects) == 2
    billing, support = rects
    assert billing.height == pytest.approx(support.height * 2, rel=0.01)
    assert billing.x < support.x  # yesterday's bar is left of today's
    assert "billing · claude: 300" in billing.title
    assert report.cost_chart.y_labels[-1].text == "$0.5000"


def test_an_empty_period_has_empty_charts() -> None:
    report = daily_usage(RobotResult.objects.all(), days=3, end=TODAY)
    assert report.series == [] and report.tokens_chart.is_empty and len(report.tokens_chart.y_labels) == 5
