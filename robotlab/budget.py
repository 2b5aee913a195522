"""A thread-safe reserve/reconcile ledger for budgets (RobotLab's ``Budget::Ledger``).

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
from typing import Any

from ._ruby import format_number
from .errors import BudgetExceeded

__all__ = ["Ledger"]


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
                raise BudgetExceeded(message)
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
