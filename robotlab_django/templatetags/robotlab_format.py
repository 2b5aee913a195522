"""``{% load robotlab_format %}``: the one way the admin and the pages write a cost.

Costs are stored with eight decimals (``Decimal('0E-8')`` when zero), and each page used to print its own
way: ``$0``, ``$0.000000``, ``$0.00000000``. :func:`format_cost` is used by the admin's columns and, as the
``usd`` filter, by the templates, so a cost reads the same everywhere.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import template

__all__ = ["format_cost", "register"]

register = template.Library()


def format_cost(value: Decimal | float | str | None) -> str:
    """A cost in US dollars: ``$0.00`` when zero, six decimals under $1, four under $100, else cents.

    Args:
        value: A ``Decimal``, float, int, numeric string or ``None`` (read as zero).

    Raises:
        ValueError: ``value`` is not a number.
    """
    try:
        amount = Decimal(value or 0)
    except (InvalidOperation, TypeError) as exc:
        raise ValueError(f"A cost must be a number, not {value!r}.") from exc
    if amount == 0:
        return "$0.00"
    places = 6 if abs(amount) < 1 else 4 if abs(amount) < 100 else 2
    return f"${amount:,.{places}f}"


@register.filter(name="usd")
def usd(value: Decimal | float | str | None) -> str:
    """The ``usd`` filter: ``{{ result.cost|usd }}`` renders :func:`format_cost`."""
    return format_cost(value)
