"""The thread-safe reserve/reconcile :class:`Ledger` (RobotLab's ``Budget::Ledger``), and :class:`LedgerLike`.

A dimension is a plain string (robots use ``"tokens"`` and ``"cost"``); a dimension with no limit is unlimited.
:class:`LedgerLike` is what a shared budget needs of a ledger, which a database ledger has too.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Protocol

from .._ruby import format_number
from ..errors import BudgetExceeded

__all__ = ["Ledger", "LedgerLike"]


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

    def reserve(self, key: str, amount: float) -> None:
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

    def reconcile(self, key: str, reserved_amount: float, actual_amount: float) -> None:
        """Swap a reservation for the amount really consumed (which may be more or less).

        ``reserved_amount`` leaves the reservation pool, which never goes below zero, and
        ``actual_amount`` is added to :attr:`consumed`.
        """
        with self._lock:
            self._reserved[key] = max(0, self._reserved[key] - reserved_amount)
            self._consumed[key] += actual_amount

    def release(self, key: str, amount: float) -> None:
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


class LedgerLike(Protocol):
    """What :class:`SharedBudget` needs of a ledger: :class:`Ledger`'s methods (a database ledger has them too)."""

    limits: dict[str, Any]

    @property
    def consumed(self) -> Mapping[str, Any]:
        """What has been consumed, per dimension."""

    def reserve(self, key: str, amount: float) -> None:
        """Reserve ``amount`` of ``key``, or raise :class:`~robotlab.BudgetExceeded`."""

    def reconcile(self, key: str, reserved_amount: float, actual_amount: float) -> None:
        """Swap a reservation for what was consumed."""

    def remaining(self, key: str) -> Any:
        """What is left of ``key``'s limit."""

    @property
    def reserved(self) -> Mapping[str, Any]:
        """The outstanding reservations, per dimension."""
