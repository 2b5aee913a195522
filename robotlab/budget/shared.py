"""The budget of a scope that several runs share (a network's): :class:`SharedBudget`.

Each LLM call of a run of the scope reserves its estimate first (:func:`estimate_call_tokens`), so the runs in
flight on any worker see each other; after the call the reservation is swapped for what it used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._ruby import format_number
from ..errors import BudgetExceeded
from .ledger import Ledger, LedgerLike

if TYPE_CHECKING:
    from ..llm import LLMRequest

__all__ = ["CHARS_PER_TOKEN", "SharedBudget", "estimate_call_tokens"]

#: Characters per token assumed when a prompt's tokens are estimated (as ``auto_compact`` does).
CHARS_PER_TOKEN = 4


def estimate_call_tokens(request: LLMRequest, *, output_cap: int) -> int:
    """What one model call may use at most, in tokens: its prompt plus its output cap.

    The prompt is its messages and tool schemas as JSON, at :data:`CHARS_PER_TOKEN` characters a token
    (rounded up); the output cap is the call's ``max_tokens`` (or ``max_completion_tokens``), else
    ``output_cap``. A budget reserves this before the call and reconciles it with what the call used.

    Args:
        request: The call about to be sent.
        output_cap: The output tokens assumed when the call sets no ``max_tokens``.
    """
    text = json.dumps([request.messages, request.tools], default=str, ensure_ascii=False)
    params = request.params or {}
    cap = params.get("max_tokens") or params.get("max_completion_tokens") or output_cap
    return -(-len(text) // CHARS_PER_TOKEN) + int(cap)


class SharedBudget:
    """A token and cost budget shared by every robot run of a scope: a network's ``token_budget`` / ``cost_budget``.

    A run of the scope is refused before its first LLM call when the budget is already spent (the seed's
    ``"budget exceeded for tokens: 60 > 50"``). Each LLM call of the run then reserves its estimate first
    (:meth:`areserve_call`: the prompt plus the call's ``max_tokens``, else :attr:`output_estimate`, or what is
    left when that is less), so the runs of the scope in flight on any worker see each other: while their
    reservations leave nothing, a call waits for them to settle, and once the scope is spent it is refused.
    After the call its reservation is swapped for what it used (:meth:`settle_call`), and :meth:`check` stops
    the run when the scope's consumption passed a limit (``"Token budget exceeded: <N> tokens used, budget is
    <M>"``, ``"Cost budget exceeded: $<used> used, budget is $<limit>"``). The errors are
    :class:`~robotlab.BudgetExceeded` with ``scope`` set, so a network run stops with them instead of going on
    to its next task.

    The calls' reservations together never pass the limit, and only a call alone in flight reserves less than
    its estimate (what is left). So the scope's consumption passes a limit by at most that one call's use
    beyond what was left plus the other calls' use beyond their estimates: with ``max_tokens`` set on the
    robots (an honest estimate), by less than one call's estimate.

    Args:
        scope: What the budget covers, named in the errors (``"network 'support'"``).
        ledger: The ledger holding the scope's limits and consumption: a :class:`Ledger` in one process,
            a database ledger across workers (``robotlab_django``).
    """

    #: Output tokens reserved for a call that sets no ``max_tokens``.
    output_estimate: int = 1_000
    #: Seconds between looks at the ledger while siblings' reservations leave nothing for a call.
    wait_interval: float = 0.05
    #: Seconds a call waits for siblings' reservations before it is refused.
    wait_limit: float = 600.0

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
        """Admit a run: nothing is reserved here (each LLM call reserves its own, :meth:`areserve_call`).

        Returns:
            The run's reservations: none.

        Raises:
            BudgetExceeded: a dimension is already spent past its limit.
        """
        try:
            for key in list(self.ledger.limits):
                self.ledger.reserve(key, 0)
        except BudgetExceeded as exc:
            raise self._mark(exc) from None
        return {}

    def _spent(self, key: str, amount: float) -> BudgetExceeded:
        limit = self.ledger.limits[key]
        total = self.ledger.consumed.get(key, 0) + self.ledger.reserved.get(key, 0) + amount
        return self._mark(BudgetExceeded(f"budget exceeded for {key}: {format_number(total)} > "
                                         f"{format_number(limit)}", dimension=key, limit=limit, usage=total))

    async def areserve_call(self, request: LLMRequest) -> dict[str, Any]:
        """Reserve one LLM call's estimate before it is sent; returns the reservations for :meth:`settle_call`.

        Tokens: :func:`estimate_call_tokens` (with :attr:`output_estimate`). When that is more than is left,
        the call waits (up to :attr:`wait_limit` seconds) for the calls in flight to settle, and then, alone in
        flight, takes what is left; so the calls in flight never reserve more than the limit, and at most one
        of them reserved less than its estimate. Cost: nothing is reserved, but the call needs something left.

        Raises:
            BudgetExceeded: the scope is spent (``"budget exceeded for tokens: <N> > <M>"``).
        """
        import asyncio
        import time

        estimate = estimate_call_tokens(request, output_cap=self.output_estimate)
        reservations: dict[str, Any] = {}
        deadline = time.monotonic() + self.wait_limit
        try:
            for key in list(self.ledger.limits):
                wanted = estimate if key == "tokens" else 0
                while True:
                    left = self.ledger.remaining(key)
                    if left <= 0 or wanted > left:  # only a call alone in flight may take less than its estimate
                        if self.ledger.reserved.get(key, 0) > 0 and time.monotonic() < deadline:
                            await asyncio.sleep(self.wait_interval)  # the calls in flight settle first
                            continue
                        if left <= 0:
                            raise self._spent(key, wanted)
                    amount = min(wanted, left)
                    try:
                        self.ledger.reserve(key, amount)
                    except BudgetExceeded:
                        continue  # a sibling took it first: look again
                    reservations[key] = amount
                    break
        except BaseException:
            self.settle_call(reservations, tokens=0, cost=0.0)
            raise
        return reservations

    def settle_call(self, reservations: Mapping[str, Any], *, tokens: int, cost: float) -> None:
        """Swap one call's ``reservations`` for what it used (``tokens``: input plus output; ``cost`` in USD)."""
        actual = {"tokens": tokens, "cost": cost}
        for key in list(self.ledger.limits):
            reserved, used = reservations.get(key, 0), actual.get(key, 0)
            if reserved or used:
                self.ledger.reconcile(key, reserved, used)

    def check(self, *, tokens: int, cost: float) -> None:
        """Stop the run when the scope's consumption plus this run's not yet settled passed a limit.

        Args:
            tokens: The run's tokens not yet settled into the ledger (0 when every call is settled as it ends).
            cost: The run's cost not yet settled into the ledger.

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
            reservations: What :meth:`reserve` returned (nothing: each call settles its own).
            tokens: The run's tokens not settled by its calls (input plus output).
            cost: The run's cost not settled by its calls.
        """
        actual = {"tokens": tokens, "cost": cost}
        for key, reserved in reservations.items():
            self.ledger.reconcile(key, reserved, actual.get(key, 0))

    def __repr__(self) -> str:
        return f"<SharedBudget {self.scope} {self.ledger!r}>"
