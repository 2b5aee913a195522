"""Budgets across worker processes: the ledger in the database (``ROBOTLAB["BUDGETS"]`` and network budgets).

Each budget scope (``"user:<pk>"``, ``"robot:<name>"``, ``"network:<turn run id>"``) has one
:class:`~robotlab_django.models.BudgetLedger` row per day: what was consumed and what calls in flight reserved.
Work *reserves* before it calls the model and *reconciles* after, each a conditional ``UPDATE``, so two worker
processes racing for the last tokens cannot both pass:

- :func:`admit_run` refuses a run whose daily budgets are spent before it starts (nothing is reserved).
- :func:`reserve_call` reserves one model call's estimate in every daily scope of its run (also a
  :class:`~robotlab_django.models.BudgetReservation` row owned by the run's row), and refuses the call
  (:class:`robotlab.BudgetExceeded`, naming what was consumed and reserved) when it does not fit;
  :func:`settle_call` swaps it for what the call used, so a limit is passed only by calls that used more than
  their estimates, each by its excess (:mod:`robotlab_django.accounting.admission`).
- :func:`release_run` releases what a run whose worker died still holds (its retry and
  ``robotlab_requeue_stuck`` call it); a reservation older than ``RESERVATION_TTL`` is released by the next
  call that reserves in its scope.
- :func:`reserve_run` / :func:`reconcile_run` reserve a fixed ``RESERVE_TOKENS`` / ``RESERVE_COST`` for a
  whole unit of work (admitted while the scope has anything left), for callers that meter their own work.
- :class:`DatabaseLedger` is the core ledger's interface on such a row, so a network's
  :class:`robotlab.budget.SharedBudget` covers the tasks of a distributed turn on every worker.
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from time import sleep
from typing import Any, TypeVar

from django.db import InterfaceError, OperationalError, connections, router, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from robotlab.errors import BudgetExceeded
from robotlab_django.conf import app_settings
from robotlab_django.models import BudgetLedger, BudgetReservation

__all__ = ["CallReservation", "DatabaseLedger", "Reservation", "admit_run", "daily_scopes", "reconcile_run",
           "release_run", "reserve_call", "reserve_run", "settle_call", "spend_today"]

T = TypeVar("T")
#: Tries of a ledger call the database refused for a moment (a locked SQLite table, a dropped connection), and the
#: first wait in seconds (doubled): a conditional ``UPDATE`` or an atomic block that raised changed nothing.
ATTEMPTS, BACKOFF = 4, 0.02
_DB_THREAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="robotlab-ledger")


def _sync(fn: Callable[[], T]) -> T:
    """Run the ORM call ``fn`` in a plain thread (a robot's budget is checked on RobotLab's event loop)."""

    def call() -> T:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return fn()
            except (OperationalError, InterfaceError):
                if attempt == ATTEMPTS:
                    raise
                sleep(BACKOFF * 2 ** (attempt - 1))
            finally:
                connections.close_all()  # no connection kept between checks; a broken one is replaced
        raise AssertionError("unreachable")

    return _DB_THREAD.submit(call).result()


def _row(scope: str, day: dt.date) -> BudgetLedger:
    return BudgetLedger.objects.get_or_create(scope=scope, day=day)[0]


def _take(scope: str, day: dt.date, *, tokens: int, cost: Decimal, token_limit: float | None,
          cost_limit: float | Decimal | None,
          strict: bool) -> bool:
    """Reserve ``tokens``/``cost`` in the scope if its limits allow; True when they did (``strict``: see below)."""
    # strict: consumed + reserved + amount <= limit (the core ledger's rule); else consumed + reserved < limit
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


def _spent_message(scope: str, day: dt.date, *, needed: tuple[int, Decimal] | None = None) -> str:
    """The chat page's words for a refusal in ``scope``: what was consumed and, when they count, reserved.

    ``needed``: the refused call's estimate ``(tokens, cost)``.
    """
    row = _row(scope, day)
    token_limit, cost_limit = _limits(scope)
    who = ("Your daily budget" if scope.startswith("user:")
           else f"The daily budget of robot '{scope.removeprefix('robot:')}'")
    total = row.consumed_tokens + row.reserved_tokens + (needed[0] if needed else 0)
    by_tokens = token_limit is not None and (total > token_limit if needed else total >= token_limit)
    values: tuple[Decimal, Decimal, Decimal, Decimal] = (
        (Decimal(row.consumed_tokens), Decimal(row.reserved_tokens), Decimal(int(token_limit)),
         Decimal(needed[0] if needed else 0)) if by_tokens
        else (row.consumed_cost, row.reserved_cost, Decimal(str(cost_limit)), needed[1] if needed else Decimal(0)))
    consumed, reserved, limit, need = values

    def amount(value: Decimal) -> str:
        return f"{int(value)} tokens" if by_tokens else f"${value:.2f}"

    used = f"{int(consumed) if by_tokens else amount(consumed)} of {amount(limit)} used today"
    if consumed >= limit:  # consumption alone spent it
        return f"{who} is spent ({used}); it renews tomorrow."
    if reserved > 0:
        used = f"{used}, {amount(reserved)} more reserved by calls in progress"
    need_text = f"; the next call needs up to {amount(need)}" if needed is not None else ""
    renews = "try again when those calls end, or tomorrow" if reserved > 0 else "it renews tomorrow"
    return f"{who} has too little left ({used}{need_text}); {renews}."


def reserve_run(user_id: object, robot_name: str) -> Reservation:
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


def reconcile_run(reservation: Reservation, *, tokens: int, cost: float | Decimal | None) -> None:
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


def daily_scopes(user_id: object, robot_name: str) -> list[str]:
    """The daily budget scopes with a limit that a run of ``robot_name`` for user ``user_id`` counts against.

    Args:
        user_id: The thread owner's primary key, or ``None`` (anonymous).
        robot_name: The robot (or network) that runs.
    """
    scopes = [f"robot:{robot_name}"] + ([f"user:{user_id}"] if user_id is not None else [])
    return [scope for scope in scopes if any(limit is not None for limit in _limits(scope))]


def admit_run(scopes: list[str]) -> None:
    """Refuse a run before it starts when a daily budget of ``scopes`` is spent (``consumed + reserved >= limit``).

    Raises:
        BudgetExceeded: with the chat page's message; ``scope`` is the spent scope.
    """
    day = timezone.localdate()
    for scope in scopes:
        token_limit, cost_limit = _limits(scope)
        row = _row(scope, day)
        spent_tokens = token_limit is not None and row.consumed_tokens + row.reserved_tokens >= token_limit
        if spent_tokens or (cost_limit is not None
                            and row.consumed_cost + row.reserved_cost >= Decimal(str(cost_limit))):
            raise _refusal(scope, day, "tokens" if spent_tokens else "cost")


def _refusal(scope: str, day: dt.date, dimension: str, needed: tuple[int, Decimal] | None = None) -> BudgetExceeded:
    token_limit, cost_limit = _limits(scope)
    row = _row(scope, day)
    usage = (row.consumed_tokens + row.reserved_tokens if dimension == "tokens"
             else float(row.consumed_cost + row.reserved_cost))
    exc = BudgetExceeded(_spent_message(scope, day, needed=needed), dimension=dimension,
                         limit=token_limit if dimension == "tokens" else cost_limit, usage=usage)
    exc.scope = scope
    return exc


@dataclass
class CallReservation:
    """What :func:`reserve_call` reserved for one model call: a :class:`BudgetReservation` row per scope."""

    day: dt.date
    tokens: int
    cost: Decimal
    rows: list[tuple[str, int]] = field(default_factory=list)  # (scope, reservation pk), in lock order


class _Refused(Exception):
    def __init__(self, scope: str, dimension: str) -> None:
        super().__init__(scope)
        self.scope, self.dimension = scope, dimension


def reserve_call(scopes: list[str], *, owner: object, tokens: int, cost: float | Decimal) -> CallReservation:
    """Reserve one model call's estimate in every scope of ``scopes``, all or none.

    A scope admits the call when ``consumed + reserved + estimate <= limit`` in each limited dimension;
    reservations older than ``RESERVATION_TTL`` in these scopes are released first (their runs died).

    Args:
        scopes: From :func:`daily_scopes`.
        owner: The primary key of the run's result row (:func:`release_run` finds the reservations by it).
        tokens: The call's estimated tokens (prompt plus output cap).
        cost: The call's estimated cost in USD.

    Raises:
        BudgetExceeded: the estimate does not fit in a scope (nothing stays reserved); the message names what
            the scope consumed and what calls in flight reserved.
    """
    day, amount = timezone.localdate(), Decimal(str(cost))
    _expire(scopes)
    reservation = CallReservation(day=day, tokens=int(tokens), cost=amount)
    try:
        with transaction.atomic(using=router.db_for_write(BudgetLedger)):
            for scope in sorted(scopes):  # one lock order for every worker
                token_limit, cost_limit = _limits(scope)
                if not _take(scope, day, tokens=reservation.tokens, cost=amount, token_limit=token_limit,
                             cost_limit=cost_limit, strict=True):
                    row = _row(scope, day)
                    over_tokens = (token_limit is not None
                                   and row.consumed_tokens + row.reserved_tokens + reservation.tokens > token_limit)
                    raise _Refused(scope, "tokens" if over_tokens else "cost")
                held = BudgetReservation.objects.create(scope=scope, day=day, owner=str(owner),
                                                        tokens=reservation.tokens, cost=amount)
                reservation.rows.append((scope, held.pk))
    except _Refused as refused:
        raise _refusal(refused.scope, day, refused.dimension, (reservation.tokens, amount)) from None
    return reservation


def _release(scope: str, pk: int, day: dt.date, tokens: int, cost: Decimal, used_tokens: int,
             used_cost: Decimal) -> None:
    """Delete reservation ``pk`` and settle its scope's ledger, in one transaction; once only.

    A reservation that is gone already (released by the requeue command or its expiry) only adds what was used.
    """
    with transaction.atomic(using=router.db_for_write(BudgetLedger)):
        held = BudgetReservation.objects.filter(pk=pk).delete()[0] > 0
        _settle(scope, day, reserved_tokens=tokens if held else 0, reserved_cost=cost if held else Decimal(0),
                tokens=used_tokens, cost=used_cost)


def settle_call(reservation: CallReservation, *, tokens: int, cost: float | Decimal | None) -> None:
    """Swap a call's reservation for what it used (``tokens``: input plus output; ``cost`` in USD)."""
    used = Decimal(str(cost or 0))
    for scope, pk in reservation.rows:
        _release(scope, pk, reservation.day, reservation.tokens, reservation.cost, int(tokens), used)
    reservation.rows = []


def release_run(owner: object) -> int:
    """Release every reservation the run ``owner`` (a result row's primary key) still holds; how many.

    What an attempt that died held (a killed worker) is freed for the day; what its calls used is not known
    and is not added.
    """
    held = BudgetReservation.objects.filter(owner=str(owner)).order_by("scope", "pk")
    count = 0
    for pk, scope, day, tokens, cost in held.values_list("pk", "scope", "day", "tokens", "cost"):
        _release(scope, pk, day, tokens, cost, 0, Decimal(0))
        count += 1
    return count


def _expire(scopes: list[str]) -> None:
    ttl = app_settings.BUDGETS["RESERVATION_TTL"]
    if ttl is None:
        return
    stale = BudgetReservation.objects.filter(scope__in=scopes,
                                             created_at__lt=timezone.now() - dt.timedelta(seconds=float(ttl)))
    for pk, scope, day, tokens, cost in stale.order_by("scope", "pk").values_list("pk", "scope", "day", "tokens",
                                                                                  "cost"):
        _release(scope, pk, day, tokens, cost, 0, Decimal(0))


def spend_today(user_ids: Iterable[object]) -> dict[str, tuple[int, Decimal]]:
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

    @property
    def reserved(self) -> dict[str, Any]:
        """What calls in flight reserved, per dimension (read from the database)."""
        values = self._values()
        return {"tokens": values["reserved_tokens"], "cost": values["reserved_cost"]}

    def remaining(self, key: str) -> Any:
        """``limit - consumed - reserved``, floored at 0 (``inf`` without a limit)."""
        limit = self.limits.get(key)
        if limit is None:
            return float("inf")
        values = self._values()
        return max(limit - values[key] - values[f"reserved_{key}"], 0)

    def reserve(self, key: str, amount: float) -> None:
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

    def reconcile(self, key: str, reserved_amount: float, actual_amount: float) -> None:
        """Swap a reservation of ``key`` for the amount consumed."""
        if key not in ("tokens", "cost"):
            return
        tokens = key == "tokens"
        _sync(lambda: _settle(self.scope, self.day, reserved_tokens=int(reserved_amount) if tokens else 0,
                              reserved_cost=Decimal(0) if tokens else Decimal(str(reserved_amount)),
                              tokens=int(actual_amount) if tokens else 0,
                              cost=Decimal(0) if tokens else Decimal(str(actual_amount))))


def _number(value: object) -> str:
    from robotlab.text_analysis import format_number  # noqa: PLC0415 (off the import of every budget check)
    return format_number(value)
