"""The admin's lists at millions of rows: bounded counts, filter choices and totals from the rollups.

Django's change list counts every matching row for its paginator, and a field's list filter reads
the distinct values of the whole table: both scan millions of rows. Here:

- :class:`CappedPaginator` counts at most :data:`COUNT_CAP` rows (``SELECT COUNT(*)`` over a
  ``LIMIT``): past it, the list says "more than 10,000" and pages on.
- :func:`rollup_filter` builds a list filter whose choices come from the usage rollups (a few
  hundred rows), not from ``SELECT DISTINCT`` over the results.
- :func:`list_totals` gives the filtered list's totals exactly while it is within the cap; past it,
  from the rollups when the only filters are the robot and the model (the rollups hold exactly
  those), else it says the totals were not computed.
- :func:`today_spend` lists today's tokens and cost per user, with the daily budget limits.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import Count, Sum
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from robotlab_django.accounting.rollups import rollup_model
from robotlab_django.conf import app_settings

if TYPE_CHECKING:
    from django.contrib.admin.views.main import ChangeList
    from django.db.models import QuerySet

__all__ = ["COUNT_CAP", "CappedPaginator", "list_totals", "rollup_filter", "today_spend"]

#: The most rows a change list counts; past it, "more than 10,000".
COUNT_CAP = 10_000

#: The list filters the rollups can total (their query parameters).
ROLLUP_PARAMETERS = frozenset({"robot_name", "model"})


class CappedPaginator(Paginator):  # type: ignore[type-arg]
    """A paginator that counts at most :data:`COUNT_CAP` rows (:attr:`capped` says it stopped there)."""

    @cached_property
    def count(self) -> int:
        """The number of rows, up to ``COUNT_CAP + 1``."""
        cap = COUNT_CAP
        rows: Any = self.object_list  # a queryset: the admin pages querysets
        return int(rows.order_by()[:cap + 1].count())

    @property
    def capped(self) -> bool:
        """Whether there are more rows than were counted."""
        return self.count > COUNT_CAP

    @property
    def cap_display(self) -> str:
        """The cap as the list shows it: ``10,000``."""
        return f"{COUNT_CAP:,}"


def rollup_filter(field: str, title: str | Promise) -> type[admin.SimpleListFilter]:
    """A list filter on ``field`` (``robot_name`` or ``model``) whose choices are read from the rollups.

    Args:
        field: The result column, which is also the rollup column.
        title: The filter's title in the sidebar.
    """

    def lookups(self: admin.SimpleListFilter, request: HttpRequest,
                model_admin: admin.ModelAdmin[Any]) -> list[tuple[str, str]]:
        values = (rollup_model()._default_manager.order_by(field).values_list(field, flat=True).distinct())
        return [(value, value or "-") for value in values[:500]]

    def queryset(self: admin.SimpleListFilter, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset if value is None else queryset.filter(**{field: value})

    return type(f"Rollup{field.title().replace('_', '')}Filter", (admin.SimpleListFilter,), {
        "title": title, "parameter_name": field, "lookups": lookups, "queryset": queryset,
        "__doc__": f"Filter by {field}, with choices from the usage rollups."})


def _exact(queryset: QuerySet[Any]) -> dict[str, Any]:
    values = queryset.order_by().aggregate(runs=Count("pk"), input_tokens=Sum("input_tokens"),
                                           output_tokens=Sum("output_tokens"), cost=Sum("cost"))
    return {"runs": values["runs"] or 0, "input_tokens": values["input_tokens"] or 0,
            "output_tokens": values["output_tokens"] or 0, "cost": values["cost"] or Decimal(0), "source": "rows"}


def list_totals(changelist: ChangeList) -> dict[str, Any] | None:
    """The totals of a result change list's filtered rows, or ``None`` when they would cost a scan.

    Exact (from the rows) while the list has at most ``COUNT_CAP`` rows; from the rollups when it has
    more and is filtered by robot and model only; else ``None``.
    """
    paginator = changelist.paginator
    if not getattr(paginator, "capped", False):
        return _exact(changelist.queryset)
    params = {key for key in changelist.params if key not in ("o", "p")}  # ordering and page change nothing
    if changelist.query or not params <= ROLLUP_PARAMETERS:
        return None
    rollups = rollup_model()._default_manager.filter(**{key: changelist.params[key] for key in params})
    values = rollups.aggregate(runs=Sum("runs"), input_tokens=Sum("input_tokens"),
                               output_tokens=Sum("output_tokens"), cost=Sum("cost"))
    return {"runs": values["runs"] or 0, "input_tokens": values["input_tokens"] or 0,
            "output_tokens": values["output_tokens"] or 0, "cost": values["cost"] or Decimal(0),
            "source": "rollups"}


def today_spend(limit: int = 50) -> list[dict[str, Any]]:
    """Today's runs, tokens and cost per user (the top ``limit`` by cost), with their daily budget limits.

    Args:
        limit: How many users to list.
    """
    rows = list(rollup_model()._default_manager.filter(day=timezone.localdate()).exclude(user_id="")
                .values("user_id").annotate(runs=Sum("runs"), input_tokens=Sum("input_tokens"),
                                            output_tokens=Sum("output_tokens"), cost=Sum("cost"))
                .order_by("-cost", "user_id")[:limit])
    user_model = get_user_model()
    names = {str(pk): name for pk, name in user_model._default_manager.filter(
        pk__in=[row["user_id"] for row in rows]).values_list("pk", user_model.USERNAME_FIELD)}
    budgets = app_settings.BUDGETS
    return [{**row, "user": names.get(row["user_id"], _("(deleted user)")),
             "tokens": (row["input_tokens"] or 0) + (row["output_tokens"] or 0),
             "token_limit": budgets["USER_TOKENS"], "cost_limit": budgets["USER_COST"]} for row in rows]
