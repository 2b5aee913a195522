"""Costs read the same on every admin page (issue 17: ``$0``, ``$0.000000`` and ``$0.00000000`` before)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.template import Context, Template

from robotlab_django.templatetags.robotlab_format import format_cost


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("0E-8"), "$0.00"), (None, "$0.00"), (0, "$0.00"), (Decimal("0.00250000"), "$0.002500"),
    (0.5, "$0.500000"), (Decimal("12.5"), "$12.5000"), (Decimal("1234.5"), "$1,234.50"), ("0.0052", "$0.005200")])
def test_format_cost(value: Any, text: str) -> None:
    assert format_cost(value) == text


def test_a_non_number_names_itself() -> None:
    with pytest.raises(ValueError, match="A cost must be a number, not 'abc'"):
        format_cost("abc")


def test_the_templates_use_the_same_format() -> None:
    rendered = Template("{% load robotlab_format %}{{ zero|usd }} {{ small|usd }}").render(
        Context({"zero": Decimal("0E-8"), "small": Decimal("0.0025")}))
    assert rendered == "$0.00 $0.002500"


@pytest.mark.django_db
def test_a_stored_cost_reads_without_trailing_zeros_in_python() -> None:
    """Issue 17: ``result.cost`` printed ``0E-8`` for a free run; it reads ``0`` (and ``0.0025``)."""
    from robotlab_django.models import RobotResult, Thread

    thread = Thread.objects.create(robot_name="echo")
    free = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="echo", cost=Decimal(0))
    paid = RobotResult.objects.create(thread=thread, sequence_number=2, robot_name="echo",
                                      cost=Decimal("0.00250000"))
    free.refresh_from_db()
    paid.refresh_from_db()
    assert str(free.cost) == "0" and str(paid.cost) == "0.0025"
    assert str(RobotResult.objects.get(pk=paid.pk).cost) == "0.0025" and paid.cost == Decimal("0.0025")
