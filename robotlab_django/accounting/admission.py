"""Admission per model call: every call of a run reserves its estimate in the daily budgets first.

The daily budgets (``ROBOTLAB["BUDGETS"]``, :mod:`robotlab_django.accounting.budgets`) are checked at the model call,
the one place where tokens are spent: :func:`attach` wraps a robot's LLM in a :class:`BudgetedLLM`, which

1. estimates the call (:func:`robotlab.budget.estimate_call_tokens`: its prompt plus its ``max_tokens``, or
   ``RESERVE_TOKENS`` when it sets none; ``RESERVE_COST`` for cost);
2. reserves that in every daily scope of the run (the user's, the robot's) in one transaction, or refuses
   the call with :class:`robotlab.BudgetExceeded`, so a run stops at the call that would not fit, not only
   at its start;
3. sends the call, then swaps the reservation for the tokens and cost the call used.

A limit is therefore passed only by calls that used more than their estimates, each by its excess, however
many runs share it on however many workers. The same wrapper is put on a robot's run
(:func:`robotlab_django.runs.runnables.prepare`), on each robot of a network turn in one process, and on the robot
of each task of a distributed turn (:mod:`robotlab_django.networks.distributed`). It sits under the checkpoint
wrapper (:mod:`robotlab_django.runs.checkpoints`): a step replayed from its checkpoint is not sent, so it reserves
and counts nothing again.

Reservations are rows owned by the run's result row: :class:`RunGate` releases what an earlier attempt of the
same row left (its worker was killed) before the row runs again.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import TYPE_CHECKING

from robotlab.budget import estimate_call_tokens
from robotlab.llm import LLM, AutoLLM, LLMClient, LLMRequest, LLMResponse, TextCallback
from robotlab_django import swappable
from robotlab_django.accounting import budgets
from robotlab_django.conf import BUDGET_LIMITS, app_settings
from robotlab_django.runs.sync_bridge import blocking

if TYPE_CHECKING:
    from robotlab.robot import Robot
    from robotlab_django.models import RobotResult

__all__ = ["BudgetedLLM", "RunGate", "attach", "gate_for"]


class RunGate:
    """The daily budget scopes of one run, and the row that owns its reservations.

    Args:
        scopes: The limited scopes (:func:`robotlab_django.accounting.budgets.daily_scopes`).
        owner: The primary key of the run's result row.
    """

    def __init__(self, scopes: list[str], owner: object) -> None:
        self.scopes, self.owner = scopes, owner

    def admit(self) -> None:
        """Refuse the run before it starts when one of its budgets is spent (see :func:`budgets.admit_run`)."""
        budgets.admit_run(self.scopes)

    def reserve(self, tokens: int) -> budgets.CallReservation:
        """Reserve a call of ``tokens`` (and ``RESERVE_COST``), or raise :class:`robotlab.BudgetExceeded`."""
        return budgets.reserve_call(self.scopes, owner=self.owner, tokens=tokens,
                                    cost=Decimal(str(app_settings.BUDGETS["RESERVE_COST"])))


def gate_for(row: RobotResult, *, robot_name: str | None = None) -> RunGate | None:
    """The gate of ``row``'s run, after releasing what an earlier attempt of the row still holds.

    ``None`` when no daily budget applies (``ROBOTLAB["BUDGETS"]`` sets no limit for its scopes).

    Args:
        row: The run's result row (a task row of a distributed turn owns its own reservations).
        robot_name: The robot (or network) the ``ROBOT_*`` limits count: ``row.robot_name`` by default.
    """
    limits = app_settings.BUDGETS
    if all(limits[key] is None for key in BUDGET_LIMITS):
        return None
    user_id = swappable.thread_model().objects.filter(pk=row.thread_id).values_list("user_id", flat=True).first()
    scopes = budgets.daily_scopes(user_id, robot_name or row.robot_name)
    if not scopes:
        return None
    budgets.release_run(row.pk)  # an earlier attempt whose worker died left them
    return RunGate(scopes, row.pk)


class BudgetedLLM:
    """An LLM whose every call reserves its estimate in the run's daily budgets first, and reconciles after.

    Args:
        llm: The real LLM.
        gate: The run's :class:`RunGate`.
        output_cap: Output tokens assumed for a call without ``max_tokens`` (``RESERVE_TOKENS``).
    """

    def __init__(self, llm: LLM, gate: RunGate, *, output_cap: int) -> None:
        self.llm, self.gate, self.output_cap = llm, gate, output_cap

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Reserve, call, reconcile; a call that does not fit raises :class:`robotlab.BudgetExceeded` unsent."""
        reservation = await blocking(self.gate.reserve, estimate_call_tokens(request, output_cap=self.output_cap))
        tokens, cost = 0, 0.0
        try:
            response = await self.llm.complete(request, on_text=on_text)
            tokens, cost = response.input_tokens + response.output_tokens, response.cost
            return response
        finally:  # also when the call failed or the run was cancelled: the reservation goes either way
            await asyncio.shield(blocking(budgets.settle_call, reservation, tokens=tokens, cost=cost))


def attach(robot: Robot, gate: RunGate | None) -> None:
    """Put ``robot``'s LLM behind ``gate`` (nothing when ``gate`` is ``None``); before checkpoints are attached."""
    if gate is None or (robot.model is None and isinstance(robot.llm, LLMClient | AutoLLM)):
        return  # no budget, or a robot with no model: it raises its "no model" ConfigurationError itself
    robot.llm = BudgetedLLM(robot.llm, gate, output_cap=int(app_settings.BUDGETS["RESERVE_TOKENS"]))
