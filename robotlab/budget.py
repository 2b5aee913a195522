"""Budgets.

The thread-safe reserve/reconcile :class:`Ledger` (RobotLab's ``Budget::Ledger``) and a robot's :class:`Budget` (its
token totals and its ``token_budget`` / ``cost_budget`` limits).

An LLM call's size is not known before it is made, so a robot with ``token_budget`` or
``cost_budget`` first *reserves* everything still available (which raises
:class:`~robotlab.BudgetExceeded` when the budget is already overspent), makes the call,
then *reconciles* the reservation with what the call actually used::

    ledger = Ledger(limits={"tokens": 10_000, "cost": 0.50})
    reserved = ledger.remaining("tokens")
    ledger.reserve("tokens", reserved)
    ...                                            # the billable work
    ledger.reconcile("tokens", reserved, 3_412)    # consumed["tokens"] == 3412

The dimensions are plain strings; robots use ``"tokens"`` and ``"cost"``, but any key
works, and a key with no limit is unlimited.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

from ._ruby import format_number
from .errors import BudgetExceeded

__all__ = ["Budget", "Ledger", "SharedBudget"]


class _ZeroDefault(dict[str, Any]):
    """A dict in which a missing key reads as ``0`` without being inserted (Ruby's ``Hash.new(0)``)."""

    def __missing__(self, key: str) -> int:
        return 0


class Ledger:
    """Consumption and reservations per dimension, checked against per-dimension limits.

    Args:
        limits: Ceiling per dimension. A dimension absent here (or set to ``None``) is
            unlimited. A limit of ``0`` is a real limit.
        consumed: Starting consumption, for example restored from an earlier session.

    Every method takes the ledger's lock, so one ledger can be shared between threads.
    """

    def __init__(self, *, limits: Mapping[str, float] | None = None,
                 consumed: Mapping[str, float] | None = None) -> None:
        self._lock = threading.Lock()
        self.limits: dict[str, Any] = dict(limits or {})
        self._consumed: _ZeroDefault = _ZeroDefault(consumed or {})
        self._reserved: _ZeroDefault = _ZeroDefault()

    @property
    def consumed(self) -> dict[str, Any]:
        """What has actually been consumed, per dimension; an untouched dimension reads ``0``."""
        return self._consumed

    @property
    def reserved(self) -> Mapping[str, Any]:
        """The outstanding reservations, per dimension (a read-only view; missing reads ``0``)."""
        return MappingProxyType(self._reserved)

    def reserve(self, key: str, amount: Any) -> None:
        """Reserve ``amount`` of ``key``'s remaining budget.

        Raises :class:`~robotlab.BudgetExceeded` (``"budget exceeded for tokens: 10588 > 10000"``)
        when consumed + already reserved + ``amount`` would be *more* than the limit; reaching
        the limit exactly is allowed. A dimension with no limit never raises and records
        nothing.
        """
        with self._lock:
            limit = self.limits.get(key)
            if limit is None:
                return
            total = self._consumed[key] + self._reserved[key] + amount
            if total > limit:
                message = f"budget exceeded for {key}: {format_number(total)} > {format_number(limit)}"
                raise BudgetExceeded(message, dimension=key, limit=limit, usage=total)
            self._reserved[key] += amount

    def reconcile(self, key: str, reserved_amount: Any, actual_amount: Any) -> None:
        """Swap a reservation for the amount really consumed (which may be more or less).

        ``reserved_amount`` leaves the reservation pool, which never goes below zero, and
        ``actual_amount`` is added to :attr:`consumed`.
        """
        with self._lock:
            self._reserved[key] = max(0, self._reserved[key] - reserved_amount)
            self._consumed[key] += actual_amount

    def release(self, key: str, amount: Any) -> None:
        """Drop a reservation without recording consumption (the reserved work was skipped)."""
        with self._lock:
            self._reserved[key] = max(0, self._reserved[key] - amount)

    def remaining(self, key: str) -> Any:
        """``limit - consumed - reserved``, floored at 0; ``math.inf`` for a dimension with no limit."""
        with self._lock:
            limit = self.limits.get(key)
            if limit is None:
                return math.inf
            return max(limit - self._consumed[key] - self._reserved[key], 0)

    def __repr__(self) -> str:
        return (f"<Ledger limits={self.limits!r} consumed={dict(self._consumed)!r} "
                f"reserved={dict(self._reserved)!r}>")


class Budget:
    r"""A robot's token totals and budget limits, checked after every LLM response of its runs.

    A run first :meth:`reserve`\ s everything still available in the :attr:`ledger` (which raises
    :class:`~robotlab.BudgetExceeded` when a budget is already overspent), :meth:`record`\ s each
    response's tokens and :meth:`check`\ s the limits (the seed's messages), and :meth:`reconcile`\ s
    its reservation with what it used.

    Args:
        robot_name: The robot's name, carried by the errors.
        token_budget: Total tokens (input + output, all runs) allowed.
        cost_budget: Total cost in USD allowed.
    """

    def __init__(self, *, robot_name: str, token_budget: int | None = None,
                 cost_budget: float | None = None) -> None:
        self.robot_name = robot_name
        self.token_budget = token_budget
        self.cost_budget = cost_budget
        self.total_input_tokens = 0
        self.total_output_tokens = 0
        limits = {k: v for k, v in (("tokens", token_budget), ("cost", cost_budget)) if v is not None}
        self.ledger: Ledger | None = Ledger(limits=limits) if limits else None

    def record(self, input_tokens: int, output_tokens: int) -> None:
        """Add one response's tokens to the totals."""
        self.total_input_tokens += input_tokens
        self.total_output_tokens += output_tokens

    def reset_totals(self) -> None:
        """Zero the token totals (the ledger is kept)."""
        self.total_input_tokens = 0
        self.total_output_tokens = 0

    def check(self, run_cost: float) -> None:
        """Stop the run when the totals passed ``token_budget`` or the cost passed ``cost_budget``.

        Raises:
            BudgetExceeded: ``"Token budget exceeded: <N> tokens used, budget is <M>"`` or
                ``"Cost budget exceeded: $<used> used, budget is $<limit>"`` (six decimals).
        """
        if self.token_budget is not None:
            used = self.total_input_tokens + self.total_output_tokens
            if used > self.token_budget:
                raise BudgetExceeded(
                    f"Token budget exceeded: {int(used)} tokens used, budget is {int(self.token_budget)}",
                    robot_name=self.robot_name, dimension="tokens", limit=self.token_budget, usage=used,
                )
        if self.cost_budget is not None and self.ledger is not None:
            cost = self.ledger.consumed["cost"] + run_cost
            if cost > self.cost_budget:
                raise BudgetExceeded(
                    f"Cost budget exceeded: ${cost:.6f} used, budget is ${self.cost_budget:.6f}",
                    robot_name=self.robot_name, dimension="cost", limit=self.cost_budget, usage=cost,
                )

    def reserve(self) -> dict[str, float]:
        """Reserve everything still available per limited dimension; returns the reservations."""
        if self.ledger is None:
            return {}
        reservations: dict[str, float] = {}
        try:
            for key in self.ledger.limits:
                amount = self.ledger.remaining(key)
                self.ledger.reserve(key, amount)
                reservations[key] = amount
        except BudgetExceeded as exc:
            exc.robot_name = self.robot_name
            raise
        return reservations

    def reconcile(self, reservations: Mapping[str, float], *, tokens: int, cost: float) -> None:
        """Swap ``reservations`` for what the run used."""
        if self.ledger is None:
            return
        actual = {"tokens": tokens, "cost": cost}
        for key, reserved in reservations.items():
            self.ledger.reconcile(key, reserved, actual.get(key, 0))


class LedgerLike(Protocol):
    """What :class:`SharedBudget` needs of a ledger: :class:`Ledger`'s methods (a database ledger has them too)."""

    limits: dict[str, Any]

    @property
    def consumed(self) -> Mapping[str, Any]:
        """What has been consumed, per dimension."""

    def reserve(self, key: str, amount: Any) -> None:
        """Reserve ``amount`` of ``key``, or raise :class:`~robotlab.BudgetExceeded`."""

    def reconcile(self, key: str, reserved_amount: Any, actual_amount: Any) -> None:
        """Swap a reservation for what was consumed."""

    def remaining(self, key: str) -> Any:
        """What is left of ``key``'s limit."""


class SharedBudget:
    """A token and cost budget shared by every robot run of a scope: a network's ``token_budget`` / ``cost_budget``.

    Each robot run of the scope reserves what is left before its first LLM call (an already spent
    budget raises the seed's ``"budget exceeded for tokens: 60 > 50"``), is checked after every LLM
    response against what the scope consumed plus what the run used so far (``"Token budget exceeded:
    <N> tokens used, budget is <M>"``, ``"Cost budget exceeded: $<used> used, budget is $<limit>"``) and
    reconciles its reservation when it ends. The errors are :class:`~robotlab.BudgetExceeded` with
    ``scope`` set, so a network run stops with them instead of going on to its next task.

    Args:
        scope: What the budget covers, named in the errors (``"network 'support'"``).
        ledger: The ledger holding the scope's limits and consumption: a :class:`Ledger` in one process,
            a database ledger across workers (``robotlab_django``).
    """

    def __init__(self, *, scope: str, ledger: LedgerLike) -> None:
        self.scope = scope
        self.ledger = ledger

    @classmethod
    def of(cls, scope: str, *, token_budget: int | None, cost_budget: float | None) -> SharedBudget | None:
        """A budget with an in-process :class:`Ledger` for these limits, or ``None`` when both are unset.

        Args:
            scope: What the budget covers (see the class).
            token_budget: Total tokens (input plus output) of every run of the scope.
            cost_budget: Total cost in USD of every run of the scope.
        """
        limits = {k: v for k, v in (("tokens", token_budget), ("cost", cost_budget)) if v is not None}
        return cls(scope=scope, ledger=Ledger(limits=limits)) if limits else None

    def _mark(self, exc: BudgetExceeded) -> BudgetExceeded:
        exc.scope = self.scope
        return exc

    def reserve(self) -> dict[str, Any]:
        """Reserve what is left per limited dimension; returns the reservations to reconcile.

        Raises:
            BudgetExceeded: a dimension is already spent past its limit.
        """
        reservations: dict[str, Any] = {}
        try:
            for key in list(self.ledger.limits):
                amount = self.ledger.remaining(key)
                self.ledger.reserve(key, amount)
                reservations[key] = amount
        except BudgetExceeded as exc:
            self.reconcile(reservations, tokens=0, cost=0.0)
            raise self._mark(exc) from None
        return reservations

    def check(self, *, tokens: int, cost: float) -> None:
        """Stop the run when the scope's consumption plus this run's so far passed a limit.

        Args:
            tokens: The run's tokens so far (input plus output).
            cost: The run's cost so far.

        Raises:
            BudgetExceeded: with the seed's "Token budget exceeded" / "Cost budget exceeded" message.
        """
        limits, consumed = self.ledger.limits, self.ledger.consumed
        token_limit, cost_limit = limits.get("tokens"), limits.get("cost")
        if token_limit is not None:
            used = consumed.get("tokens", 0) + tokens
            if used > token_limit:
                raise self._mark(BudgetExceeded(
                    f"Token budget exceeded: {int(used)} tokens used, budget is {int(token_limit)}",
                    dimension="tokens", limit=token_limit, usage=used))
        if cost_limit is not None:
            spent = float(consumed.get("cost", 0)) + cost
            if spent > cost_limit:
                raise self._mark(BudgetExceeded(
                    f"Cost budget exceeded: ${spent:.6f} used, budget is ${float(cost_limit):.6f}",
                    dimension="cost", limit=cost_limit, usage=spent))

    def reconcile(self, reservations: Mapping[str, Any], *, tokens: int, cost: float) -> None:
        """Swap ``reservations`` for what the run used.

        Args:
            reservations: What :meth:`reserve` returned.
            tokens: The run's tokens (input plus output).
            cost: The run's cost.
        """
        actual = {"tokens": tokens, "cost": cost}
        for key, reserved in reservations.items():
            self.ledger.reconcile(key, reserved, actual.get(key, 0))

    def __repr__(self) -> str:
        return f"<SharedBudget {self.scope} {self.ledger!r}>"
