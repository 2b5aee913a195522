"""A robot's :class:`Budget`: its token totals and its ``token_budget`` / ``cost_budget`` limits."""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import BudgetExceeded
from .ledger import Ledger

__all__ = ["Budget"]


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
