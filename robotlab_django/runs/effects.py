"""Side effects exactly once: every call of a tool with side effects is journaled before it runs.

A tool declared ``@robotlab.tool(side_effect=True)`` (or a :class:`robotlab.Tool` with ``side_effect = True``, as
every write tool of :func:`robotlab_django.tools.model_tools` is) changes something outside the run: it sends a
mail, charges a card, writes a row. Checkpoints (:mod:`robotlab_django.runs.checkpoints`) store a tool step once it
returned, so a worker that died *inside* the tool would run it again on the retry. :func:`attach` gives each robot
of an app run the :class:`ToolEffects` hook, which records a :class:`~robotlab_django.models.ToolEffect` row before
such a call runs, under an idempotency key made of the run's row, the step and the model's tool-call id:

* no row yet: the row is stored ``started`` (committed before the tool runs), the tool runs, and the row becomes
  ``completed`` or ``failed`` with what the model read (``denied`` when the tool's approver denied the call, which
  the app asks inside the journaled call: :mod:`robotlab_django.runs.approvals`);
* a ``completed``, ``failed`` or ``denied`` row (the retry of a run whose worker died after the tool returned): the
  model reads the stored result and the tool is not called;
* a ``started`` row (the worker died inside the tool: whether the effect happened is unknown): the row becomes
  ``unknown`` and the run parks, its question saying so (``"effect"`` in the row's ``question`` is the row's id).
  A person resolves it in the admin (:mod:`robotlab_django.runs.effect_control`): marks it done with a result,
  which the model then reads, or has the tool run again; either queues the run again.

A tool whose writes commit in one transaction with its effect row (``commits_effect``: a model tool, when its model
lives in the same database as the journal) marks the row ``completed`` inside that transaction
(:func:`current_call`, :meth:`EffectCall.complete`), so a ``started`` row of such a tool means that nothing was
written: it simply runs again.

The journal's database work goes through :func:`~robotlab_django.runs.sync_bridge.blocking`, on the run's
connection: a run executed inside a transaction journals inside it, with its writes.
"""

from __future__ import annotations

import contextvars
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import models, router, transaction
from django.db.models import F
from django.utils import timezone

from robotlab.hooks import Hook, Proceed, ToolCallHookContext
from robotlab.run_context import current_run_context
from robotlab.streaming import HITL_REQUESTED, run_publisher
from robotlab.tools.ask import AskRequest
from robotlab.tools.parking import RunParked
from robotlab_django.models import ToolEffect
from robotlab_django.runs.checkpoints import BLOCK, ToolCheckpoint, stored_tool_result, tool_output
from robotlab_django.runs.sync_bridge import blocking

if TYPE_CHECKING:
    from robotlab.robot import Robot
    from robotlab_django.models import RobotResult
    from robotlab_django.runs.deps import RunDeps

__all__ = ["EffectCall", "EffectJournal", "EffectRequest", "ToolEffects", "attach", "current_call", "effect_key",
           "forget_runs", "guards", "shares_database"]

#: What :meth:`EffectJournal.begin` tells the hook to do with a call.
RUN, REPLAY, PARK = "run", "replay", "park"
#: The result of a call its approver denied (:attr:`robotlab.tools.approval.Decision.denial`).
_DENIAL = re.compile(r"denied( by .+)?", re.DOTALL)

_current: contextvars.ContextVar[EffectCall | None] = contextvars.ContextVar("robotlab_effect_call", default=None)


def effect_key(result_pk: int | str, step: int, call_id: str) -> str:
    """The idempotency key of a tool call: the run's result row, the step and the model's tool-call id."""
    return f"{result_pk}:{step}:{call_id}"[:255]


def guards(tool: object) -> bool:
    """Whether calls of ``tool`` are journaled: it declares ``side_effect``."""
    return bool(getattr(tool, "side_effect", False))


def shares_database(model: type[models.Model]) -> bool:
    """Whether ``model``'s writes go to the journal's database, so they can commit in one transaction with it."""
    return router.db_for_write(model) == router.db_for_write(ToolEffect)


def current_call() -> EffectCall | None:
    """The journaled tool call in progress in this task, ``None`` outside one."""
    return _current.get()


@dataclass(frozen=True)
class EffectCall:
    """One journaled tool call while its tool runs: its row, its database, and the tool.

    Attributes:
        pk: The :class:`~robotlab_django.models.ToolEffect` row.
        using: Its database alias.
        tool: The tool being called (a tool checks that the call is its own before completing it).
    """

    pk: Any
    using: str
    tool: Any

    def complete(self, value: object) -> None:
        """Mark the call ``completed`` with ``value``, in the caller's transaction (database work).

        A tool whose writes and this update commit together leaves no unknown outcome.
        """
        ToolEffect.objects.using(self.using).filter(pk=self.pk, status=ToolEffect.Status.STARTED).update(
            status=ToolEffect.Status.COMPLETED, result=tool_output(value), error="", finished_at=timezone.now())


@dataclass(frozen=True)
class EffectRequest(AskRequest):
    """The question of a run parked on an effect whose outcome is unknown; ``effect`` is its row's id."""

    effect: Any = None

    def to_dict(self) -> dict[str, Any]:
        """:meth:`AskRequest.to_dict` with ``effect``."""
        return {**super().to_dict(), "effect": self.effect}


def _call_id(name: str) -> str:
    """The model's id of the call of tool ``name`` in progress: the first one the conversation has no result for."""
    context = current_run_context()
    if context is None:
        return ""
    answered: set[str] = set()
    for message in reversed(context.robot.conversation.messages):
        if message.get("role") == "tool":
            answered.add(str(message.get("tool_call_id")))
            continue
        calls = (message.get("tool_calls") or []) if message.get("role") == "assistant" else []
        for call in calls:
            if str(call.get("id")) not in answered and (call.get("function") or {}).get("name") == name:
                return str(call.get("id") or "")
        break
    return ""


class EffectJournal:
    """The journal of one robot's run on one result row.

    Args:
        row: The run's result row (a network task's own row when the turn is distributed).
        deps: The run's :class:`~robotlab_django.RunDeps` (its user goes on each row).
        robot_name: The robot whose tools it journals.
        block: The robot's block of step indexes (see :data:`robotlab_django.runs.checkpoints.BLOCK`).
    """

    def __init__(self, row: RobotResult, deps: RunDeps | None, robot_name: str, *, block: int = 0) -> None:
        self.result_pk = row.pk
        self.run_id = str(getattr(deps, "run_id", None) or row.run_id)
        user = getattr(deps, "user", None)
        self.user_id = None if user is None else user.pk
        self.robot_name = robot_name
        self.using = router.db_for_write(ToolEffect)
        self._next = block * BLOCK + BLOCK // 2  # the steps of a run without checkpoints: a range of their own

    def step(self, ctx: ToolCallHookContext) -> int:
        """The call's step: its checkpointed step index, else the next of this journal's own."""
        checkpoint = ctx.ext(ToolCheckpoint.namespace)
        if "step" in checkpoint:
            return int(checkpoint.step)
        self._next += 1
        return self._next - 1

    def begin(self, key: str, step: int, call_id: str, ctx: ToolCallHookContext) -> tuple[str, ToolEffect]:
        """What to do with the call (:data:`RUN`, :data:`REPLAY` or :data:`PARK`) and its row (database work)."""
        status = ToolEffect.Status
        objects = ToolEffect.objects.using(self.using)
        with transaction.atomic(using=self.using):
            effect = objects.select_for_update().filter(key=key).first()
            if effect is None:
                arguments = ctx.tool_args if isinstance(ctx.tool_args, dict | list | str) else str(ctx.tool_args)
                effect = objects.create(
                    key=key, result_pk=str(self.result_pk), run_id=self.run_id, step=step, call_id=call_id,
                    robot_name=self.robot_name, tool_name=ctx.tool_name, user_id=self.user_id, arguments=arguments,
                    atomic=bool(getattr(ctx.tool, "commits_effect", False)))
                return RUN, effect
            if effect.status in (status.COMPLETED, status.FAILED, status.DENIED):
                return REPLAY, effect
            if effect.status == status.RETRY or (effect.status == status.STARTED and effect.atomic):
                objects.filter(pk=effect.pk).update(status=status.STARTED, attempts=F("attempts") + 1, error="")
                return RUN, effect
            if effect.status == status.STARTED:
                objects.filter(pk=effect.pk).update(
                    status=status.UNKNOWN,
                    error="The tool started and its worker stopped before it returned: whether its effect happened "
                          "is unknown.")
            effect.status = status.UNKNOWN
            return PARK, effect

    def finish(self, effect: ToolEffect, ctx: ToolCallHookContext) -> None:
        """Store the call's outcome (unless the tool completed it in its own transaction) (database work).

        ``failed`` when the tool raised; ``denied`` when its approver denied the call (an ``approve=True`` tool whose
        result is the denial, ``"denied by <who>"``): the tool did not run.
        """
        status = ToolEffect.Status
        value, error = ctx.tool_result, ctx.tool_error
        outcome = status.COMPLETED if error is None else status.FAILED
        if error is None and getattr(ctx.tool, "approve", False) and _DENIAL.fullmatch(str(value)):
            outcome = status.DENIED
        ToolEffect.objects.using(self.using).filter(pk=effect.pk, status=status.STARTED).update(
            status=outcome, result=tool_output(value), finished_at=timezone.now(),
            error="" if error is None else f"{type(error).__name__}: {error}")

    def forget(self, effect: ToolEffect) -> None:
        """Delete the row of a call whose tool parked the run (it runs afresh once the run resumes) (database work)."""
        ToolEffect.objects.using(self.using).filter(pk=effect.pk, status=ToolEffect.Status.STARTED).delete()

    def park(self, effect: ToolEffect) -> RunParked:
        """The :class:`RunParked` of a run that met ``effect`` with an unknown outcome (``hitl.requested`` sent)."""
        request = EffectRequest(
            id=uuid.uuid4().hex, robot=self.robot_name, effect=effect.pk,
            question=(f"An effect's outcome is unknown: the call of {effect.tool_name} (step {effect.step}) started "
                      "and its worker stopped before it returned. A person resolves it in the admin (tool effects): "
                      "mark it done with its result, or retry it; the run then goes on."))
        publish = run_publisher()
        if publish is not None:
            publish(HITL_REQUESTED, request.to_dict())
        return RunParked(request)


class ToolEffects(Hook):
    """The ``around_tool_call`` hook that journals the calls of tools with side effects (``ctx.local.journal``).

    It sits inside :class:`~robotlab_django.runs.checkpoints.ToolCheckpoint` (registered after it), so a call whose
    step was checkpointed never reaches it.
    """

    namespace = "robotlab_effects"

    @classmethod
    async def around_tool_call(cls, ctx: ToolCallHookContext, proceed: Proceed) -> Any:
        """Run, replay or park the call as its journal row says (module docs)."""
        if not guards(ctx.tool):
            return await proceed()
        journal: EffectJournal = ctx.local.journal
        step = journal.step(ctx)
        call_id = _call_id(ctx.tool_name)
        action, effect = await blocking(journal.begin, effect_key(journal.result_pk, step, call_id), step, call_id,
                                        ctx)
        if action == REPLAY:
            ctx.tool_result = stored_tool_result(effect.result or {})
            return None
        if action == PARK:
            raise journal.park(effect)
        token = _current.set(EffectCall(effect.pk, journal.using, ctx.tool))
        try:
            outcome = await proceed()
        except RunParked:  # the tool asked its user: it runs afresh, journaled afresh, once the answer comes
            await blocking(journal.forget, effect)
            raise
        finally:
            _current.reset(token)
        await blocking(journal.finish, effect, ctx)
        return outcome


def attach(robot: Robot, row: RobotResult, deps: RunDeps | None, *, block: int = 0) -> EffectJournal:
    """Journal the side-effecting tool calls of ``robot``'s run of ``row`` (after its checkpoints are attached).

    Args:
        robot: The robot about to run.
        row: Its run's result row.
        deps: The run's :class:`~robotlab_django.RunDeps`.
        block: As for :func:`robotlab_django.runs.checkpoints.attach`.
    """
    journal = EffectJournal(row, deps, str(getattr(robot, "name", "") or ""), block=block)
    robot.on(ToolEffects, context={"journal": journal})
    return journal


def forget_runs(result_pks: Iterable[int | str]) -> int:
    """Delete the journal rows of the runs ``result_pks`` (their result rows are being deleted); how many went.

    Retention and erasure call it with each batch of results they delete: the rows hold the runs' tool arguments
    and results, which go with the runs.
    """
    return int(ToolEffect.objects.filter(result_pk__in=[str(pk) for pk in result_pks]).delete()[0])
