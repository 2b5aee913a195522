"""Budgets across worker processes: the ledger in the database (``ROBOTLAB["BUDGETS"]`` and network budgets).

Each budget scope (``"user:<pk>"``, ``"robot:<name>"``, ``"network:<turn run id>"``) has one
:class:`~robotlab_django.models.BudgetLedger` row per day holding what was consumed and what running
runs have reserved. Like the core :class:`robotlab.budget.Ledger`, a run *reserves* before it calls
the model and *reconciles* after; here both are single conditional ``UPDATE`` statements, so two
worker processes racing for the last tokens cannot both pass (the row lock of PostgreSQL, the
database lock of SQLite):

- :func:`reserve_run` admits a run when every daily scope it belongs to has something left
  (``consumed + reserved < limit``) and reserves ``RESERVE_TOKENS`` / ``RESERVE_COST`` in each; a
  spent budget raises :class:`robotlab.BudgetExceeded` with a message for the chat page. Concurrent
  runs therefore pass a limit by at most one run's overshoot of its reservation.
- :func:`reconcile_run` swaps the reservations for what the run used.
- :class:`DatabaseLedger` is the core ledger's interface on such a row, so a network's
  :class:`robotlab.budget.SharedBudget` covers the tasks of a distributed turn on every worker.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar

from django.db import connections
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from robotlab.errors import BudgetExceeded

from .conf import app_settings
from .models import BudgetLedger

__all__ = ["DatabaseLedger", "Reservation", "reconcile_run", "reserve_run", "spend_today"]

T = TypeVar("T")
_DB_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="robotlab-ledger")


def _sync(fn: Callable[[], T]) -> T:
    """Run the ORM call ``fn`` in a plain thread (a robot's budget is checked on RobotLab's event loop)."""

    def call() -> T:
        try:
            return fn()
        finally:
            connections.close_all()  # the thread's connection is not left open between checks

    return _DB_THREAD.submit(call).result()


def _row(scope: str, day: dt.date) -> Any:
    return BudgetLedger.objects.get_or_create(scope=scope, day=day)[0]


def _take(scope: str, day: dt.date, *, tokens: int, cost: Decimal, token_limit: Any, cost_limit: Any,
          strict: bool) -> bool:
    """Add ``tokens``/``cost`` to the scope's reservations if its limits allow; True when they did.

    ``strict``: the reservation itself must fit (``consumed + reserved + amount <= limit``, the core
    ledger's rule); else the scope must only have something left (``consumed + reserved < limit``).
    """
    _row(scope, day)
    rows = BudgetLedger.objects.filter(scope=scope, day=day)
    if token_limit is not None:
        ceiling = Value(int(token_limit)) - F("reserved_tokens")
        rows = (rows.filter(consumed_tokens__lte=ceiling - Value(tokens)) if strict
                else rows.filter(consumed_tokens__lt=ceiling))
    if cost_limit is not None:
        ceiling = Value(Decimal(str(cost_limit))) - F("reserved_cost")
        rows = (rows.filter(consumed_cost__lte=ceiling - Value(cost)) if strict
                else rows.filter(consumed_cost__lt=ceiling))
    return rows.update(reserved_tokens=F("reserved_tokens") + tokens, reserved_cost=F("reserved_cost") + cost) == 1


def _settle(scope: str, day: dt.date, *, reserved_tokens: int, reserved_cost: Decimal, tokens: int,
            cost: Decimal) -> None:
    BudgetLedger.objects.filter(scope=scope, day=day).update(
        reserved_tokens=Greatest(F("reserved_tokens") - reserved_tokens, Value(0)),
        reserved_cost=Greatest(F("reserved_cost") - reserved_cost, Value(Decimal(0))),
        consumed_tokens=F("consumed_tokens") + tokens, consumed_cost=F("consumed_cost") + cost)


@dataclass
class Reservation:
    """What :func:`reserve_run` reserved: per scope, on ``day``, ``tokens`` and ``cost``."""

    day: dt.date
    scopes: list[str] = field(default_factory=list)
    tokens: int = 0
    cost: Decimal = Decimal(0)


def _limits(scope: str) -> tuple[Any, Any]:
    budgets = app_settings.BUDGETS
    prefix = "USER" if scope.startswith("user:") else "ROBOT"
    return budgets[f"{prefix}_TOKENS"], budgets[f"{prefix}_COST"]


def _spent_message(scope: str, day: dt.date) -> str:
    row = _row(scope, day)
    token_limit, cost_limit = _limits(scope)
    if scope.startswith("user:"):
        who = "Your daily budget"
    else:
        who = f"The daily budget of robot '{scope.removeprefix('robot:')}'"
    if token_limit is not None and row.consumed_tokens + row.reserved_tokens >= token_limit:
        spent = f"{row.consumed_tokens} of {int(token_limit)} tokens used today"
    else:
        spent = f"${row.consumed_cost:.2f} of ${Decimal(str(cost_limit)):.2f} used today"
    return f"{who} is spent ({spent}); it renews tomorrow."


def reserve_run(user_id: Any, robot_name: str) -> Reservation:
    """Reserve a run of ``robot_name`` for user ``user_id`` (``None``: anonymous) against today's budgets.

    Args:
        user_id: The thread owner's primary key, or ``None``.
        robot_name: The robot (or network) that runs.

    Raises:
        BudgetExceeded: a daily budget of the user or the robot is spent (nothing stays reserved).
    """
    budgets = app_settings.BUDGETS
    day = timezone.localdate()
    reservation = Reservation(day=day, tokens=int(budgets["RESERVE_TOKENS"]),
                              cost=Decimal(str(budgets["RESERVE_COST"])))
    scopes = [f"robot:{robot_name}"] + ([f"user:{user_id}"] if user_id is not None else [])
    for scope in scopes:
        token_limit, cost_limit = _limits(scope)
        if token_limit is None and cost_limit is None:
            continue
        if not _take(scope, day, tokens=reservation.tokens, cost=reservation.cost, token_limit=token_limit,
                     cost_limit=cost_limit, strict=False):
            reconcile_run(reservation, tokens=0, cost=0)
            exc = BudgetExceeded(_spent_message(scope, day), dimension="tokens" if token_limit else "cost",
                                 limit=token_limit if token_limit is not None else cost_limit)
            exc.scope = scope
            raise exc
        reservation.scopes.append(scope)
    return reservation


def reconcile_run(reservation: Reservation, *, tokens: int, cost: Any) -> None:
    """Swap ``reservation`` for what the run used.

    Args:
        reservation: What :func:`reserve_run` returned.
        tokens: The run's input plus output tokens.
        cost: The run's cost in USD.
    """
    for scope in reservation.scopes:
        _settle(scope, reservation.day, reserved_tokens=reservation.tokens, reserved_cost=reservation.cost,
                tokens=int(tokens), cost=Decimal(str(cost or 0)))
    reservation.scopes = []


def spend_today(user_ids: list[Any]) -> dict[str, tuple[int, Decimal]]:
    """Today's consumed ``(tokens, cost)`` of each user in ``user_ids``, by primary key as a string.

    Args:
        user_ids: The users' primary keys.
    """
    rows = BudgetLedger.objects.filter(day=timezone.localdate(), scope__in=[f"user:{pk}" for pk in user_ids])
    return {row.scope.removeprefix("user:"): (row.consumed_tokens, row.consumed_cost) for row in rows}


class DatabaseLedger:
    """The core :class:`robotlab.budget.Ledger`'s interface on a :class:`BudgetLedger` row (any process).

    Args:
        scope: The row's scope (``"network:<turn run id>"``).
        day: The row's day.
        limits: ``{"tokens": ..., "cost": ...}`` (a missing dimension is unlimited).
    """

    def __init__(self, *, scope: str, day: dt.date, limits: Mapping[str, Any]) -> None:
        self.scope, self.day = scope, day
        self.limits: dict[str, Any] = dict(limits)

    def _values(self) -> dict[str, Any]:
        row = _sync(lambda: _row(self.scope, self.day))
        return {"tokens": row.consumed_tokens, "cost": float(row.consumed_cost),
                "reserved_tokens": row.reserved_tokens, "reserved_cost": float(row.reserved_cost)}

    @property
    def consumed(self) -> dict[str, Any]:
        """What the scope consumed, per dimension (read from the database)."""
        values = self._values()
        return {"tokens": values["tokens"], "cost": values["cost"]}

    def remaining(self, key: str) -> Any:
        """``limit - consumed - reserved``, floored at 0 (``inf`` without a limit)."""
        limit = self.limits.get(key)
        if limit is None:
            return float("inf")
        values = self._values()
        return max(limit - values[key] - values[f"reserved_{key}"], 0)

    def reserve(self, key: str, amount: Any) -> None:
        """Reserve ``amount`` of ``key`` in one conditional update, or raise the seed's message."""
        limit = self.limits.get(key)
        if limit is None:
            return
        tokens, cost = (int(amount), Decimal(0)) if key == "tokens" else (0, Decimal(str(amount)))
        limits = {"token_limit": limit if key == "tokens" else None, "cost_limit": limit if key == "cost" else None}
        if not _sync(lambda: _take(self.scope, self.day, tokens=tokens, cost=cost, strict=True, **limits)):
            values = self._values()
            total = values[key] + values[f"reserved_{key}"] + amount
            raise BudgetExceeded(f"budget exceeded for {key}: {_number(total)} > {_number(limit)}",
                                 dimension=key, limit=limit, usage=total)

    def reconcile(self, key: str, reserved_amount: Any, actual_amount: Any) -> None:
        """Swap a reservation of ``key`` for the amount consumed."""
        if key not in ("tokens", "cost"):
            return
        tokens = key == "tokens"
        _sync(lambda: _settle(self.scope, self.day, reserved_tokens=int(reserved_amount) if tokens else 0,
                              reserved_cost=Decimal(0) if tokens else Decimal(str(reserved_amount)),
                              tokens=int(actual_amount) if tokens else 0,
                              cost=Decimal(0) if tokens else Decimal(str(actual_amount))))


def _number(value: Any) -> str:
    from robotlab._ruby import format_number

    return format_number(value)
