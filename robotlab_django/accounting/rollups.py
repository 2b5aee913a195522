"""Daily usage rollups: runs, tokens and cost per day, robot, model and user, kept as rows change.

The admin's usage page, its list filters and totals, and the budget report read a
:class:`~robotlab_django.models.UsageRollup` row per day, robot, model and thread owner instead of
aggregating every result row (a busy site has millions). Every result row counts in the rollup of
its key: the day it was created (in the default time zone), its robot, its model and its thread's
owner, with one run and its tokens and cost, whatever its status. So the rollups always equal an
aggregate over the result rows that exist or existed: deleting rows (retention, erasure) leaves the
usage they had, which holds no content.

Two writes keep them in step, in the same transaction as the change:

- :func:`count_new` when a row is inserted (:func:`robotlab_django.runs.records.append_result`);
- :func:`update_rows` when rows' counted columns change (the outcome of a run: its model, tokens and
  cost). It locks the rows, updates them, and moves each row's contribution from its old key and
  figures to its new ones. An update that touches no counted column is a plain ``update()``.

:func:`rebuild` recomputes them from the result rows (the data migration and
``manage.py robotlab_rollups --rebuild`` use it).
"""

from __future__ import annotations

import datetime as dt
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.apps import apps as global_apps
from django.db import connections, transaction
from django.db.models import Count, F, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from robotlab_django import swappable

if TYPE_CHECKING:
    from django.apps.registry import Apps
    from django.db.models import Manager, QuerySet

    from robotlab_django.models import RobotResult, UsageRollup

__all__ = ["COUNTED", "batch", "count_new", "forget_user", "rebuild", "rollup_model", "update_known", "update_rows",
           "values_of"]

#: The result columns a rollup depends on: a change to any of them moves the row's contribution.
COUNTED = frozenset({"created_at", "robot_name", "model", "input_tokens", "output_tokens", "cost", "thread",
                     "thread_id"})

_READ = ("pk", "created_at", "robot_name", "model", "thread__user_id", "input_tokens", "output_tokens", "cost")

Key = tuple[dt.date, str, str, str]


_batches = threading.local()


@contextmanager
def batch() -> Iterator[None]:
    """Defer the rollup writes of the block to its end, all keys in one sorted pass.

    A transaction that writes other rows after a rollup change would otherwise lock a rollup row
    before a thread or result row, while another transaction locks them the other way round (a
    deadlock on PostgreSQL). Wrapped in ``batch()``, the rollup rows are always the last locked, in
    key order. Nothing is written when the block raises.
    """
    stack = getattr(_batches, "stack", None)
    if stack is None:
        stack = _batches.stack = []
    stack.append([])
    try:
        yield
        items = stack[-1]
    finally:
        stack.pop()
    merged = _Deltas()
    for deltas, _using in items:
        for key, values in deltas.rows.items():
            merged.rows[key] = [a + b for a, b in zip(merged.rows[key], values, strict=True)]
    if items:
        merged.apply(items[0][1])


def rollup_model(apps: Apps | None = None) -> type[UsageRollup]:
    """The :class:`~robotlab_django.models.UsageRollup` model (of the migration state ``apps``, when given)."""
    return (apps or global_apps).get_model("robotlab", "UsageRollup")


def _day(created: dt.datetime | None) -> dt.date:
    when = created or timezone.now()
    return timezone.localtime(when, timezone.get_default_timezone()).date() if timezone.is_aware(when) \
        else when.date()


def _key(values: dict[str, Any]) -> Key:
    user = values.get("thread__user_id")
    return (_day(values.get("created_at")), str(values.get("robot_name") or ""), str(values.get("model") or ""),
            "" if user is None else str(user))


class _Deltas:
    """Changes to apply per rollup key: runs, input tokens, output tokens, cost."""

    def __init__(self) -> None:
        self.rows: dict[Key, list[Any]] = defaultdict(lambda: [0, 0, 0, Decimal(0)])

    def add(self, values: dict[str, Any], sign: int) -> None:
        item = self.rows[_key(values)]
        item[0] += sign
        item[1] += sign * int(values.get("input_tokens") or 0)
        item[2] += sign * int(values.get("output_tokens") or 0)
        item[3] += sign * Decimal(values.get("cost") or 0)

    def apply(self, using: str | None = None) -> None:
        pending = getattr(_batches, "stack", None)
        if pending:  # inside batch(): applied once, at its end
            pending[-1].append((self, using))
            return
        self.write(using)

    def write(self, using: str | None) -> None:
        """Apply the deltas in key order (every transaction locks rollup rows in the same order).

        A key that gains runs is upserted; consecutive ones go in one ``INSERT ... ON CONFLICT DO UPDATE`` on
        PostgreSQL and SQLite (a network turn queues its tasks' rows at once: one statement for all their keys,
        instead of seven each while the keys are new). A key that loses runs is dropped when that leaves it
        counting none (one ``DELETE`` whose condition says so), else updated, and dropped if it then counts none.
        """
        manager = rollup_model()._default_manager.db_manager(using)
        gains: list[tuple[Key, list[Any]]] = []
        for key, values in sorted(self.rows.items()):
            if not any(values):
                continue
            if values[0] >= 0:
                gains.append((key, values))
                continue
            _upsert(manager, gains)
            gains = []
            fields = dict(zip(("day", "robot_name", "model", "user_id"), key, strict=True))
            if _drop(manager, key, -values[0]):  # it counted these runs only
                continue
            if manager.filter(**fields).update(**_change(values)):
                _drop(manager, key, 0)
        _upsert(manager, gains)


_SUMS = ("runs", "input_tokens", "output_tokens", "cost")


def _change(values: list[Any]) -> dict[str, Any]:
    return {name: F(name) + value for name, value in zip(_SUMS, values, strict=True)}


def _drop(manager: Manager[Any], key: Key, runs: int) -> int:
    """Delete the rollup row of ``key`` if it counts ``runs`` runs (one statement); how many rows went."""
    meta, connection = manager.model._meta, connections[manager.db]
    quote, ops = connection.ops.quote_name, connection.ops
    columns = [quote(meta.get_field(name).column) for name in ("day", "robot_name", "model", "user_id", "runs")]
    day, robot, llm, user = key
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quote(meta.db_table)} WHERE "  # noqa: S608 - quoted names, values as params
                       + " AND ".join(f"{column} = %s" for column in columns),
                       [ops.adapt_datefield_value(day), robot, llm, user, runs])
        return int(cursor.rowcount)


def _upsert(manager: Manager[Any], gains: list[tuple[Key, list[Any]]]) -> None:
    """Add ``gains`` to their rollup rows, creating the missing ones."""
    if not gains:
        return
    connection = connections[manager.db]
    if connection.vendor not in ("postgresql", "sqlite"):  # no portable upsert: update, else create
        for (day, robot, llm, user), values in gains:
            key = {"day": day, "robot_name": robot, "model": llm, "user_id": user}
            if not manager.filter(**key).update(**_change(values)):
                with transaction.atomic(using=manager.db):  # a savepoint: a racing insert wins, then we update
                    row, created = manager.get_or_create(**key, defaults=dict(zip(_SUMS, values, strict=True)))
                if not created:
                    manager.filter(pk=row.pk).update(**_change(values))
        return
    meta, quote, ops = manager.model._meta, connection.ops.quote_name, connection.ops
    table = quote(meta.db_table)
    keys = [quote(meta.get_field(name).column) for name in ("day", "robot_name", "model", "user_id")]
    sums = [quote(meta.get_field(name).column) for name in _SUMS]
    params: list[Any] = []
    for (day, robot, llm, user), (runs, tokens_in, tokens_out, cost) in gains:
        params += [ops.adapt_datefield_value(day), robot, llm, user, runs, tokens_in, tokens_out,
                   ops.adapt_decimalfield_value(Decimal(cost), 20, 8)]
    row = "(" + ", ".join(["%s"] * 8) + ")"
    sql = (f"INSERT INTO {table} ({', '.join(keys + sums)}) VALUES {', '.join([row] * len(gains))} "
           f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
           + ", ".join(f"{column} = {table}.{column} + EXCLUDED.{column}" for column in sums))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


_UNKNOWN = object()


def _values_of(row: RobotResult, thread_user: object = _UNKNOWN) -> dict[str, Any]:
    if thread_user is _UNKNOWN:
        thread_user = (swappable.thread_model()._default_manager.filter(pk=row.thread_id)
                       .values_list("user_id", flat=True).first())
    return {"created_at": row.created_at, "robot_name": row.robot_name, "model": row.model,
            "thread__user_id": thread_user, "input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
            "cost": row.cost}


def count_new(row: RobotResult, *, user_id: object = _UNKNOWN) -> None:
    """Count the just-inserted result ``row`` in its rollup (call inside the insert's transaction).

    Args:
        row: The new result row.
        user_id: Its thread owner's primary key (``None`` for no owner), when the caller has it (saves a query).
    """
    deltas = _Deltas()
    deltas.add(_values_of(row, user_id), +1)
    deltas.apply(row._state.db)


def _computed(before: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any] | None:
    """``before`` with ``fields`` applied, or ``None`` when a value is an expression the database computes."""
    after = dict(before)
    for name, value in fields.items():
        if hasattr(value, "resolve_expression"):
            return None
        if name in ("thread", "thread_id"):
            return None
        if name in after:
            after[name] = value
    return after


#: The counted columns of a result row itself (its thread's owner is the rest of its key).
_OWN = ("created_at", "robot_name", "model", "input_tokens", "output_tokens", "cost")


def values_of(row: RobotResult, thread_user: object) -> dict[str, Any]:
    """The counted values of the result ``row`` as the instance holds them, its thread's owner ``thread_user``.

    What :func:`update_known` is given for a row the caller read (or inserted) in the same job.
    """
    return {"pk": row.pk, **_values_of(row, thread_user)}


def update_known(queryset: QuerySet[RobotResult], before: dict[str, Any], **fields: object) -> int:
    """:func:`update_rows` for the one row ``before`` describes (:func:`values_of`), without locking or reading it.

    The update is conditional on the row's counted columns still holding ``before``'s values (PostgreSQL checks them
    again under the row's lock), so the contribution moved is the row's own. When they changed meanwhile (nothing is
    updated) it falls back to :func:`update_rows`. ``before``'s thread owner is taken as is: the caller read it in the
    same job (as :func:`update_rows` reads it, unlocked, in its statement).

    Returns:
        How many rows were updated.
    """
    after = _computed(before, fields)
    if not COUNTED.intersection(fields) or after is None:
        return update_rows(queryset, **fields)
    using = queryset.db
    with transaction.atomic(using=using, savepoint=False):
        matched = {name: before[name] for name in _OWN}
        if not queryset.filter(pk=before["pk"], **matched).update(**fields):
            return update_rows(queryset, **fields)
        deltas = _Deltas()
        deltas.add(before, -1)
        deltas.add(after, +1)
        deltas.apply(using)
    return 1


def update_rows(queryset: QuerySet[RobotResult], **fields: object) -> int:
    """``queryset.update(**fields)``, moving the rollup contribution of every row it changes.

    When ``fields`` holds a counted column (:data:`COUNTED`), the matching rows are locked
    (``select_for_update``) and read, updated by primary key, and each row's old figures are taken
    off its old rollup and its new ones added to its new rollup, in one transaction.

    Args:
        queryset: The result rows to update (any filter; it is evaluated once, under the lock).
        **fields: The columns to set, as for ``QuerySet.update``.

    Returns:
        How many rows were updated.
    """
    if not COUNTED.intersection(fields):
        return int(queryset.update(**fields))
    using = queryset.db
    with transaction.atomic(using=using, savepoint=False):  # inside a caller's transaction: no savepoint
        before = list(queryset.select_for_update(of=("self",)).values(*_READ))
        if not before:
            return 0
        pks = [item["pk"] for item in before]
        model = queryset.model
        count = int(model._default_manager.db_manager(using).filter(pk__in=pks).update(**fields))
        afters = [_computed(item, fields) for item in before]
        if any(after is None for after in afters):
            fresh = {item["pk"]: item for item in
                     model._default_manager.db_manager(using).filter(pk__in=pks).values(*_READ)}
            afters = [fresh.get(item["pk"]) for item in before]
        deltas = _Deltas()
        for old, new in zip(before, afters, strict=True):
            deltas.add(old, -1)
            if new is not None:
                deltas.add(new, +1)
        deltas.apply(using)
    return count


def _aggregate(queryset: QuerySet[Any]) -> Iterable[dict[str, Any]]:
    tz = timezone.get_default_timezone()
    rows: Iterable[dict[str, Any]] = (queryset.annotate(day=TruncDate("created_at", tzinfo=tz))
            .values("day", "robot_name", "model", "thread__user_id")
            .annotate(n=Count("pk"), i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost"))
            .order_by())
    return rows


def rebuild(*, since: dt.date | None = None, apps: Apps | None = None, using: str = "default") -> int:
    """Recompute the rollups from the result rows (all days, or the days from ``since``).

    Rollups of days that no longer have result rows are kept when ``since`` is given and deleted
    otherwise (a full rebuild equals the rows that exist).

    Args:
        since: The first day to recompute; ``None`` recomputes everything.
        apps: A migration's app registry (the data migration passes its own).
        using: The database alias.

    Returns:
        How many rollup rows were written.
    """
    rollup = rollup_model(apps)
    if apps is None:
        results: Any = swappable.result_model()
    else:
        results = apps.get_model("robotlab", "RobotResult")
    rows = results._default_manager.db_manager(using).all()
    manager = rollup._default_manager.db_manager(using)
    with transaction.atomic(using=using):
        if since is None:
            manager.all().delete()
        else:
            tz = timezone.get_default_timezone()
            rows = rows.filter(created_at__gte=dt.datetime.combine(since, dt.time.min, tzinfo=tz))
            manager.filter(day__gte=since).delete()
        batch = [rollup(day=item["day"], robot_name=item["robot_name"] or "", model=item["model"] or "",
                        user_id="" if item["thread__user_id"] is None else str(item["thread__user_id"]),
                        runs=item["n"], input_tokens=item["i"] or 0, output_tokens=item["o"] or 0,
                        cost=item["c"] or Decimal(0))
                 for item in _aggregate(rows)]
        manager.bulk_create(batch, batch_size=1000)
    return len(batch)


def forget_user(user_id: object, *, using: str = "default") -> int:
    """Fold a user's rollups into the anonymous ones (their usage stays, their id goes): for erasure.

    Returns:
        How many of the user's rollup rows were folded.
    """
    manager = rollup_model()._default_manager.db_manager(using)
    with transaction.atomic(using=using):
        rows = list(manager.select_for_update().filter(user_id=str(user_id)))
        deltas = _Deltas()
        for row in rows:
            item = deltas.rows[(row.day, row.robot_name, row.model, "")]
            item[0] += row.runs
            item[1] += row.input_tokens
            item[2] += row.output_tokens
            item[3] += row.cost
        manager.filter(pk__in=[row.pk for row in rows]).delete()
        deltas.apply(using)
    return len(rows)
