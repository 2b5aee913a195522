"""Budgets.

The thread-safe reserve/reconcile :class:`Ledger` (RobotLab's ``Budget::Ledger``), a robot's :class:`Budget` (its
token totals and its ``token_budget`` / ``cost_budget`` limits) and the :class:`SharedBudget` of a scope (a
network's), whose every LLM call reserves its estimate (:func:`estimate_call_tokens`).

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

from .ledger import Ledger
from .robot_budget import Budget
from .shared import SharedBudget, estimate_call_tokens

__all__ = ["Budget", "Ledger", "SharedBudget", "estimate_call_tokens"]
