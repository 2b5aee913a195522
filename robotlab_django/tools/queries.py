"""A search's arguments as a query: filters on the listed fields only, an ordering, a page.

:func:`search_query` reads what the model sent to ``search_<model>`` (``status``, ``title__icontains``,
``due__gte``, ``priority__in``, ``order_by``, ``limit``, ``offset``) and turns it into Django filter keywords
and a page, refusing anything else with a :class:`~robotlab.errors.ToolError` that names what it may use.
Nothing here touches the database.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import models

from robotlab.errors import ToolError

from .schemas import kind, lookups
from .values import python_value

__all__ = ["SearchQuery", "search_query"]

#: The search arguments that are no filter.
_PAGING = ("order_by", "limit", "offset")


@dataclass(frozen=True)
class SearchQuery:
    """A search, ready for ``queryset.filter(**filters).order_by(*ordering)[offset:offset + limit]``."""

    filters: dict[str, Any]
    ordering: tuple[str, ...]
    limit: int
    offset: int


def _filter_names(fields: Sequence[models.Field[Any, Any]]) -> dict[str, tuple[models.Field[Any, Any], str]]:
    names = {}
    for field in fields:
        for lookup in lookups(field):
            names[field.name if lookup == "exact" else f"{field.name}__{lookup}"] = (field, lookup)
    return names


def _filter_value(field: models.Field[Any, Any], lookup: str, value: object, where: str) -> Any:
    if lookup == "icontains":
        if not isinstance(value, str):
            raise ToolError(f"{where}: expected a string, got {value!r}")
        return value
    if lookup == "in":
        if not isinstance(value, list):
            raise ToolError(f"{where}: expected a list of values, got {value!r}")
        if field.null and any(item is None for item in value):
            raise ToolError(f"{where}: null is no value to list here; filter on {field.name}: null instead")
        return [python_value(field, item, where=f"{where}[{index}]") for index, item in enumerate(value)]
    if lookup in {"gte", "lte"} and value is None:
        raise ToolError(f"{where}: may not be null")
    return python_value(field, value, where=where)


def _count(arguments: Mapping[str, Any], name: str, default: int, low: int, high: int | None) -> int:
    value = arguments.get(name, default)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise ToolError(f"{name}: expected an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ToolError(f"{name} must be {bounds}, not {value}")
    return value


def search_query(fields: Sequence[models.Field[Any, Any]], arguments: Mapping[str, Any], *,
                 max_rows: int) -> SearchQuery:
    """The query the model's ``arguments`` to a search ask for.

    Raises:
        ToolError: an argument that is no filter of a listed field (an unlisted field, a lookup the field does not
            allow), a value of the wrong type, an ordering on an unlisted field, a ``limit`` above ``max_rows``.
    """
    names = _filter_names(fields)
    filters: dict[str, Any] = {}
    for name, value in arguments.items():
        if name in _PAGING:
            continue
        if name not in names:
            known = ", ".join(names) or "none"
            raise ToolError(f"unknown filter '{name}': the filters are {known}")
        field, lookup = names[name]
        filters[name] = _filter_value(field, lookup, value, name)
    orders = {name for field in fields if kind(field) != "json" for name in (field.name, f"-{field.name}")}
    order = arguments.get("order_by")
    if order is not None and order not in orders:
        raise ToolError(f"order_by: {order!r} is not a listed field; sort by one of {', '.join(sorted(orders))}")
    ordering = (order, "pk") if order else ("pk",)
    limit = _count(arguments, "limit", min(20, max_rows), 1, max_rows)
    return SearchQuery(filters, ordering, limit, _count(arguments, "offset", 0, 0, None))
