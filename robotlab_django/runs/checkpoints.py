"""Checkpoints: every completed LLM call and tool call of a run is a step row, replayed on re-execution.

A run executed again after its worker was lost (a killed pool child, a lost node: see
:mod:`robotlab_django.runs.claims`) starts the robot from the beginning. Without checkpoints it would send
every LLM request of the earlier attempt again (billed twice) and run its tools again (side effects
twice). With them (``ROBOTLAB["CHECKPOINT_STEPS"]``, on by default) :func:`attach` gives the robot

* a :class:`CheckpointLLM` around its LLM: the run's *i*-th request is answered from step *i* when
  that step is stored with the same :func:`llm_fingerprint` (its text goes through ``on_text`` once,
  so the stream and the saved reply stay whole); otherwise the real LLM answers and the response is
  stored as step *i* before the robot goes on;
* a :class:`ToolCheckpoint` hook (``around_tool_call``): a stored tool step with the same
  :func:`tool_fingerprint` gives its result and the tool does not run; otherwise the tool runs and
  its result is stored.

So only the step in flight when the worker died is issued again; a tool step in flight whose tool has side effects
is journaled as well (:mod:`robotlab_django.runs.effects`), so it is not repeated. A step whose input differs from the
stored one (the run diverged: a prompt or the history changed between attempts) ends the replay: it
and every later step are issued afresh and the stale steps are replaced (a warning is logged).

A replayed LLM step is not paid again, so it must not be counted again either. The daily budgets' wrapper
sits under :class:`CheckpointLLM` and never sees it; a shared budget whose ledger outlives the attempt (the
network's ``token_budget`` of a distributed turn, a database ledger that the earlier attempt settled the call
into) reserves around the whole LLM, so it goes through :class:`CheckpointedBudget`, which reserves and counts
nothing for a step that will be replayed.

Each step is stored the moment it completes, by the process's step writer (:mod:`~.step_writer`: a thread of its
own with its own database connection, in autocommit), so it survives a kill right after. A step that cannot be
stored is logged and the run goes on: checkpoints make a re-execution cheaper, never a run fail. Runs executed inside
a transaction (the ``sync`` executor under ``ATOMIC_REQUESTS``, a test case) are not checkpointed:
nothing of them would survive a crash. Steps are kept when the run ends (the admin shows them) and
deleted with their result (a cascade: retention deletes them with the thread).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, InterfaceError, OperationalError, connections, router, transaction

from robotlab.budget import SharedBudget
from robotlab.hooks import Hook, Proceed, ToolCallHookContext
from robotlab.llm import LLM, AutoLLM, LLMClient, LLMRequest, LLMResponse, TextCallback, ToolCallRequest
from robotlab_django import swappable
from robotlab_django.conf import app_settings
from robotlab_django.encoders import RobotLabJSONEncoder
from robotlab_django.runs import step_writer
from robotlab_django.runs.records import first_execution

if TYPE_CHECKING:
    from robotlab.robot import Robot
    from robotlab_django.models import RobotResult

__all__ = ["BLOCK", "LLM_STEP", "STORE_ATTEMPTS", "TOOL_STEP", "CheckpointLLM", "CheckpointedBudget", "StepLog",
           "ToolCheckpoint", "attach", "llm_fingerprint", "stored_tool_result", "tool_fingerprint", "tool_output"]

logger = logging.getLogger("robotlab_django")

#: The ``kind`` of a step that is an LLM call, and of one that is a tool call.
LLM_STEP, TOOL_STEP = "llm", "tool"
#: Step indexes per robot on one row: a network turn run in one process numbers the steps of its n-th task's
#: robot from ``n * BLOCK``.
BLOCK = 100_000
#: Times storing a step is tried when the database is busy or the connection dropped.
STORE_ATTEMPTS = 3
_BACKOFF = 0.05


def _digest(value: object) -> str:
    text = json.dumps(value, cls=RobotLabJSONEncoder, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def llm_fingerprint(request: LLMRequest) -> str:
    """SHA-256 of what an LLM call depends on: the model, the messages and the tool schemas."""
    return _digest({"model": request.model, "messages": request.messages, "tools": request.tools})


def tool_fingerprint(name: str, arguments: object) -> str:
    """SHA-256 of a tool call: the tool's name and its arguments."""
    return _digest({"tool": name, "arguments": arguments})


def _response_output(response: LLMResponse) -> dict[str, Any]:
    return {"content": response.content, "thinking": response.thinking, "model": response.model,
            "finish_reason": response.finish_reason, "input_tokens": response.input_tokens,
            "output_tokens": response.output_tokens, "cost": response.cost,
            "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}
                           for call in response.tool_calls]}


def _stored_response(output: Mapping[str, Any]) -> LLMResponse:
    return LLMResponse(content=output.get("content"), thinking=output.get("thinking"), model=output.get("model"),
                       finish_reason=output.get("finish_reason"), input_tokens=int(output.get("input_tokens") or 0),
                       output_tokens=int(output.get("output_tokens") or 0), cost=float(output.get("cost") or 0),
                       tool_calls=[ToolCallRequest(**call) for call in output.get("tool_calls") or []])


def tool_output(value: object) -> dict[str, Any]:
    """``{"json".

    <value as JSON text>}`` when the value comes back from JSON unchanged, else ``{"text": <what the model saw>}``.
    JSON text, not a JSON value: PostgreSQL's ``jsonb`` reorders keys, and the model must see the same text on
    replay.
    """
    try:
        dumped = json.dumps(value, ensure_ascii=False)
        if json.loads(dumped) == value:
            return {"json": dumped}
    except (TypeError, ValueError):
        pass
    from robotlab.robot.request import tool_result_text

    return {"text": tool_result_text(value)}


def stored_tool_result(output: Mapping[str, Any]) -> Any:
    """The tool result that :func:`tool_output` stored, as the tool returned it (the text the model saw)."""
    return json.loads(output["json"]) if "json" in output else output.get("text", "")


class StepLog:
    """The steps of one run: the stored ones, replayed in order, and the recording of new ones.

    Args:
        result_id: The run's result primary key.
        stored: The stored steps by index: ``{idx: (kind, fingerprint, output)}``.
        base: The first index of this log's steps: 0 for a robot's run; a network turn run in one process
            gives each task's robot its own block of :data:`BLOCK` indexes on the turn's row.
    """

    def __init__(self, result_id: int, stored: Mapping[int, tuple[str, str, Any]], base: int = 0) -> None:
        self.result_id = result_id
        self.stored = dict(stored)
        self.replayed = 0
        self.recorded = 0
        self.base = base
        self._next = base
        self._diverged_at: int | None = None

    def replay(self, kind: str, fingerprint: str) -> tuple[int, Any]:
        """Take the next step index: ``(idx, stored output)``, or ``(idx, None)`` when the step must be issued."""
        idx = self._next
        self._next += 1
        step = self.stored.get(idx) if self._diverged_at is None else None
        if step is None:
            return idx, None
        if step[:2] == (kind, fingerprint):
            self.replayed += 1
            return idx, step[2]
        self._diverged_at = idx
        logger.warning("robotlab: run %s diverged from its checkpoints at step %s (%s); issuing it and the "
                       "steps after it again", self.result_id, idx, kind)
        return idx, None

    def replays(self, kind: str, fingerprint: str) -> bool:
        """Whether the next step, of ``kind`` with ``fingerprint``, will be answered from its stored step."""
        step = self.stored.get(self._next) if self._diverged_at is None else None
        return step is not None and step[:2] == (kind, fingerprint)

    async def record(self, idx: int, kind: str, fingerprint: str, output: dict[str, Any]) -> None:
        """Store step ``idx`` now (committed before this returns); a failure is logged, never raised."""
        await asyncio.wrap_future(step_writer.submit(lambda: self._store(idx, kind, fingerprint, output)))

    def _store(self, idx: int, kind: str, fingerprint: str, output: dict[str, Any]) -> None:
        model: Any = swappable.step_model()
        using = router.db_for_write(model)
        try:
            for attempt in range(1, STORE_ATTEMPTS + 1):
                try:
                    if idx == self._diverged_at:  # the stale steps of the earlier attempt go, in one transaction
                        with transaction.atomic(using=using):
                            model.objects.using(using).filter(result_id=self.result_id, idx__gte=idx,
                                                              idx__lt=self.base + BLOCK).delete()
                            model.objects.using(using).create(result_id=self.result_id, idx=idx, kind=kind,
                                                              fingerprint=fingerprint, output=output)
                    else:  # one insert: committed by itself
                        model.objects.using(using).create(result_id=self.result_id, idx=idx, kind=kind,
                                                          fingerprint=fingerprint, output=output)
                    self.recorded += 1
                    return
                except (OperationalError, InterfaceError) as exc:  # busy (SQLite) or a dropped connection
                    if attempt == STORE_ATTEMPTS:
                        raise
                    logger.info("robotlab: storing step %s of run %s failed (%s); retrying", idx, self.result_id, exc)
                    connections[using].close()
                    time.sleep(_BACKOFF * attempt)
        except IntegrityError as exc:
            logger.warning("robotlab: step %s of run %s is stored already (%s); is the run executing twice?",
                           idx, self.result_id, exc)
        except Exception:
            logger.exception("robotlab: could not store step %s of run %s", idx, self.result_id)
            connections[using].close()  # the writer keeps its connection only while it works


class CheckpointLLM:
    """An LLM that answers a run's requests from its stored steps, and stores the ones it had to send.

    Args:
        llm: The real LLM.
        log: The run's :class:`StepLog`.
    """

    def __init__(self, llm: LLM, log: StepLog) -> None:
        self.llm = llm
        self.log = log

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """The stored response of this step when its request is the same, else the real LLM's (then stored)."""
        fingerprint = llm_fingerprint(request)
        idx, stored = self.log.replay(LLM_STEP, fingerprint)
        if stored is not None:
            response = _stored_response(stored)
            if on_text is not None and response.content:
                on_text(response.content)
            return response
        response = await self.llm.complete(request, on_text=on_text)
        await self.log.record(idx, LLM_STEP, fingerprint, _response_output(response))
        return response


_REPLAYED = "replayed"  # the reservations of a replayed call: none, and nothing to count when it settles


class CheckpointedBudget(SharedBudget):
    """``budget`` for the calls of one checkpointed robot: a call replayed from its stored step reserves nothing.

    Its tokens and cost were counted in ``budget``'s ledger when the attempt that stored the step settled the call;
    counting them again would pass the budget by what a retried task replays (and could refuse the replay). Every
    other call reserves and settles as in ``budget``, in the same ledger.

    Args:
        budget: The shared budget (the network's), whose ledger outlives an attempt.
        log: The robot's :class:`StepLog`.
    """

    def __init__(self, budget: SharedBudget, log: StepLog) -> None:
        super().__init__(scope=budget.scope, ledger=budget.ledger)
        self.__dict__.update({name: value for name, value in vars(budget).items()  # its tuned waits, if any
                              if name not in vars(self)})
        self.log = log

    async def areserve_call(self, request: LLMRequest) -> dict[str, Any]:
        """Nothing for a call :class:`CheckpointLLM` will replay; else ``budget``'s reservation of its estimate."""
        if self.log.replays(LLM_STEP, llm_fingerprint(request)):
            return {_REPLAYED: True}
        return await super().areserve_call(request)

    def settle_call(self, reservations: Mapping[str, Any], *, tokens: int, cost: float) -> None:
        """Count the call's ``tokens`` and ``cost`` in the ledger, unless it was replayed (counted already)."""
        if not reservations.get(_REPLAYED):
            super().settle_call(reservations, tokens=tokens, cost=cost)


class ToolCheckpoint(Hook):
    """The ``around_tool_call`` hook of a checkpointed run (``ctx.local.log`` is its :class:`StepLog`).

    A tool call it issues has its step index in ``ctx.local.step`` while the tool runs (the hooks inside it, such
    as :class:`robotlab_django.runs.effects.ToolEffects`, read it as ``ctx.ext(ToolCheckpoint.namespace).step``).
    """

    namespace = "robotlab_checkpoint"

    @classmethod
    async def around_tool_call(cls, ctx: ToolCallHookContext, proceed: Proceed) -> Any:
        """Give the stored result of this tool step when its call is the same; else run the tool and store it."""
        log: StepLog = ctx.local.log
        fingerprint = tool_fingerprint(ctx.tool_name, ctx.tool_args)
        idx, stored = log.replay(TOOL_STEP, fingerprint)
        if stored is not None:
            ctx.tool_result = stored_tool_result(stored)
            return None
        ctx.local.step = idx
        outcome = await proceed()
        await log.record(idx, TOOL_STEP, fingerprint, tool_output(ctx.tool_result))
        return outcome


def _enabled(result_model: type[RobotResult]) -> bool:
    if not app_settings.CHECKPOINT_STEPS:
        return False
    model: Any = swappable.step_model()
    if model._meta.get_field("result").related_model is not result_model:
        logger.warning("robotlab: ROBOTLAB['STEP_MODEL'] (%s) does not point at RESULT_MODEL (%s); runs are not "
                       "checkpointed", app_settings.STEP_MODEL, app_settings.RESULT_MODEL)
        return False
    connection = transaction.get_connection(router.db_for_write(model))
    if connection.vendor == "sqlite" and connection.settings_dict["NAME"] in (":memory:", ""):
        return False  # a private in-memory database: the step's own connection would see an empty one
    return not connection.in_atomic_block


def attach(robot: Robot, row: RobotResult, *, block: int = 0) -> StepLog | None:
    """Checkpoint ``robot``'s run of ``row``: wrap its LLM, hook its tool calls, load the stored steps.

    Args:
        robot: The robot about to run.
        row: Its run's result row.
        block: Which block of :data:`BLOCK` step indexes the robot's steps take: 0 for a robot's own run,
            the task's position (from 1) for each robot of a network turn run in one process.

    Returns:
        The run's :class:`StepLog`, or ``None`` when the run is not checkpointed
        (``ROBOTLAB["CHECKPOINT_STEPS"]`` is false, ``STEP_MODEL`` is not for ``RESULT_MODEL``,
        the caller is inside a transaction, the database is a private in-memory SQLite one, or the
        robot has no model and will fail anyway).
    """
    if not _enabled(type(row)):
        return None
    if robot.model is None and isinstance(robot.llm, LLMClient | AutoLLM):
        return None  # the robot raises its "no model" ConfigurationError; leave that to it
    base = block * BLOCK
    steps = [] if first_execution(row) else (  # a first execution has stored no step
        swappable.step_model().objects.filter(result_id=row.pk, idx__gte=base, idx__lt=base + BLOCK)
        .values_list("idx", "kind", "fingerprint", "output"))
    log = StepLog(row.pk, {idx: (kind, fingerprint, output) for idx, kind, fingerprint, output in steps}, base)
    robot.llm = CheckpointLLM(robot.llm, log)
    robot.on(ToolCheckpoint, context={"log": log})
    return log
