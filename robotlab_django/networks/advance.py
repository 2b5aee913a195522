"""Advancing a distributed network turn's stored state: each task's outcome applied once, the next tasks queued.

The turn's scheduling state, a :class:`robotlab.network.TurnState`, lives on the turn's row (``turn_state``, with
``turn_version`` bumped by every change: :mod:`robotlab_django.networks.distributed`). :func:`astart` stores a new
turn's state and queues its first tasks; :func:`aadvance` records a task's result (or error) and moves the turn
on: ``complete`` (or ``fail``) on the stored state, then the task's own row, the next ready tasks, their rows,
and the state, all applied in one transaction with one conditional update over the version it read, so two tasks
finishing at once on two workers each apply their result once and every next task gets exactly one row (the
loser reads the state again and retries, up to :data:`ADVANCE_ATTEMPTS` times). When the state is done the same
update finishes the turn's row (the final reply, the chat messages ``[user, assistant]``), and ``run.completed``
(or ``run.failed``) and ``stream.ended`` go out once; a failed turn stops its other tasks
(:mod:`robotlab_django.networks.stops`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from robotlab.network import Network, TurnState
from robotlab.result import RobotResult
from robotlab.streaming import RUN_COMPLETED, RUN_FAILED, RUN_STARTED, STREAM_ENDED, Event
from robotlab.task import FlowResult
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.accounting import rollups
from robotlab_django.conf import app_settings
from robotlab_django.networks import built, stops
from robotlab_django.networks.inline import Successor
from robotlab_django.runs import watch
from robotlab_django.runs.records import append_results, first_execution, outcome_fields, reply_text, save_row
from robotlab_django.runs.sync_bridge import blocking
from robotlab_django.runs.user_errors import public_run_id
from robotlab_django.streaming.event_stream import astream_run

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult as ResultRow

__all__ = ["ADVANCE_ATTEMPTS", "FINISHED", "aadvance", "astart", "load"]

logger = logging.getLogger("robotlab_django")

#: Times an advance re-reads the turn after another worker changed it first.
ADVANCE_ATTEMPTS = 50
#: The statuses of a turn (or task) row that has ended.
FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
_ROUTING = "(routing)"  # the key of a routing error among the state's errors


def load(pk: int) -> ResultRow:
    """The result row ``pk`` (a turn's or a task's), read again, with its thread's owner (``robotlab_thread_user``)."""
    row: ResultRow = swappable.result_model().objects.annotate(robotlab_thread_user=F("thread__user_id")).get(pk=pk)
    return row


def _thread_user(turn: ResultRow) -> dict[str, Any]:
    """``save_row``'s ``thread_user``: ``turn``'s thread owner as read with the turn in this job (``{}``: unread)."""
    if hasattr(turn, "robotlab_thread_user"):
        return {"thread_user": turn.robotlab_thread_user}
    if type(turn).thread.is_cached(turn):
        return {"thread_user": turn.thread.user_id}
    return {}


async def _emit(turn: ResultRow, *events: tuple[str, dict[str, Any]], first: bool = False) -> None:
    """Store and send the turn's own events (``run.*``, ``stream.ended``) under its row.

    ``first``: they are the first the turn's row stores (its ``run.started``, on the row's first execution).
    """

    async def start(callback: Callable[[Event], Any]) -> None:
        for seq, (kind, data) in enumerate(events, 1):
            callback(Event(kind=kind, run_id=turn.run_id, seq=seq, ts=time.time(), data=data))

    await astream_run(turn.thread_id, turn.pk, start, first=first)


def _commit(turn: ResultRow, version: int, state: TurnState, started: list[str], network: Network,
            finish: dict[str, Any] | None, outcome: tuple[Any, dict[str, Any]] | None = None) -> list[Any] | None:
    """Apply ``state`` over ``version``.

    Store it with the ``outcome`` (a task row and its columns) that changed it, add a queued row per started task,
    finish the turn when ``finish`` is given. The new rows; ``None`` when another worker changed the turn first
    (nothing is written).
    """
    model = type(turn)
    now = timezone.now()
    with transaction.atomic(), rollups.batch():
        fields: dict[str, Any] = {"turn_state": state.to_dict(), "turn_version": version + 1, "updated_at": now}
        if finish is None:
            fields["started_at"] = now  # the lease measures how long the turn has not moved
        if not model.objects.filter(pk=turn.pk, turn_version=version).exclude(status__in=FINISHED).update(**fields):
            return None
        if outcome is not None:  # in this transaction, and its rollups moved from the row's values as read
            save_row(*outcome, savepoint=False, **_thread_user(turn))
        queued: list[Any] = []
        if started:
            thread = swappable.thread_model()(pk=turn.thread_id)  # its row is locked and read where numbers are taken
            count = sum(name not in state.queue for name in state.parents) - len(started)  # the rows there are
            queued = append_results(thread, [
                {"robot_name": str(getattr(network.tasks[name].robot, "name", name)), "task_name": name,
                 "parent_id": turn.pk, "delegated_by": turn.robot_name, "run_id": f"{turn.run_id}.{index}",
                 "status": Status.QUEUED, **(_claiming.fields or {})} for index, name in enumerate(started, count + 1)],
                stamp=False, savepoint=False)
        if finish is not None:  # the turn's row as read for this commit (its version matched)
            save_row(turn, finish, savepoint=False, **_thread_user(turn))
    turn.turn_state, turn.turn_version = fields["turn_state"], version + 1
    return queued


#: The claim of the job that commits, for the one task it will run itself (set around :func:`_commit`).
_claiming = threading.local()


def _commit_claiming(claim: Successor | None, *args: Any) -> list[Any] | None:
    """:func:`_commit` (``args``), its one new task row queued already claimed for ``claim``'s job when given.

    Sync code, in the job's thread (where the claim's worker is known).
    """
    _claiming.fields = claim.claim() if claim is not None else None
    try:
        return _commit(*args)
    finally:
        _claiming.fields = None


def _finish_fields(turn: ResultRow, state: TurnState, network: Network,
                   outcome: tuple[Any, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The turn row's columns once ``state`` is done: completed with the final reply, or failed.

    ``outcome`` is the task row (and its columns) stored with this state, not in the database yet.
    """
    elapsed = (timezone.now() - turn.created_at).total_seconds()
    base: dict[str, Any] = {"duration": elapsed, "input_tokens": 0, "output_tokens": 0, "cost": Decimal(0),
                            "delegated_by": ""}
    failed = state.failed
    if failed is not None:
        error_type, _, detail = state.errors[failed].partition(": ")
        error = detail if failed == _ROUTING else f"Task '{failed}' of network '{network.name}' failed: {detail}"
        return {**base, "status": Status.FAILED, "error": error, "error_type": error_type, "messages": []}
    flow = state.final(network.run_params(turn.input or None))
    value = flow.value
    reply = reply_text(value.reply if isinstance(value, RobotResult) else value)
    user = [{"role": "user", "content": turn.input}] if turn.input else []
    messages = [*user, {"role": "assistant", "content": reply}]
    fields = outcome_fields(value, messages=messages) if isinstance(value, RobotResult) else {
        "status": Status.COMPLETED, "reply": reply, "messages": messages, "error": "", "error_type": ""}
    fields.update(base)
    if isinstance(value, RobotResult):  # the robot whose reply ends the network failed: so did the turn
        if outcome is not None and outcome[0].robot_name == value.robot_name:
            failure = (outcome[1].get("error", ""), outcome[1].get("error_type", "")) if (
                outcome[1].get("status") == Status.FAILED) else None
        else:
            failure = (type(turn).objects.filter(parent_id=turn.pk, robot_name=value.robot_name,
                                                 status=Status.FAILED)
                       .order_by("-pk").values_list("error", "error_type").first())
        if failure is not None:
            error, error_type = failure
            fields.update(status=Status.FAILED, error=error or error_type, error_type=error_type, messages=[])
            fields.pop("reply", None)
    return fields


async def _settle(turn: ResultRow, network: Network, change: Callable[[TurnState], None] | None,
                  outcome: tuple[Any, dict[str, Any]] | None = None, successor: Successor | None = None,
                  begin: TurnState | None = None, current: bool = False) -> list[Any]:
    """Apply ``change`` to the stored state, advance it and commit, retrying over other workers' changes.

    ``outcome`` (a task row and its columns) is stored in the same transaction as the state it changes, so a
    database error leaves both as they were: the task is still running, and the job's retry runs it again
    (from its checkpoints). When the turn no longer waits for the task, the outcome is stored alone. With a
    ``successor``, a single task started is left there for the job to run (:mod:`~.inline`), not returned.
    ``begin`` is a new turn's first state, advanced and stored over the claimed ``turn`` row as it was read (once:
    when another job of the same turn row stored one first, nothing is done). ``current``: ``turn`` is likely as
    stored (no other task of it was running when the job read it), so the first attempt starts from it instead of
    reading it again; a commit that finds it changed reads it and tries again.

    Returns:
        The primary keys of the task rows queued to send (``[]`` too when ``change`` was a duplicate).
    """
    for attempt in range(ADVANCE_ATTEMPTS):
        if begin is not None:
            fresh, state = turn, begin
        elif attempt == 0 and current and turn.turn_state:  # as the job read it: the commit says if it still is
            fresh, state = turn, TurnState.from_dict(turn.turn_state)
        else:
            fresh = await blocking(load, turn.pk)
            if fresh.status in FINISHED or not fresh.turn_state:
                break
            state = TurnState.from_dict(fresh.turn_state)
        if change is not None:
            try:
                change(state)
            except _Duplicate:
                break
        started: list[str] = []
        try:
            started = await state.advance(network.router, network.run_params(fresh.input or None))
        except Exception as exc:  # a routing error fails the turn, naming the network
            _fail_routing(state, exc)
        finish = await blocking(_finish_fields, fresh, state, network, outcome) if state.is_done else None
        claim = successor if successor is not None and len(started) == 1 and finish is None else None
        queued = await blocking(_commit_claiming, claim, fresh, fresh.turn_version, state, started, network, finish,
                                outcome)
        if queued is not None:
            if finish is not None:
                built.forget(fresh)  # no job of the turn needs its network any more
                if successor is not None:
                    successor.finished = True
                await _announce(fresh, state, network)
                if fresh.status == Status.FAILED:  # its siblings stop: the idle ones now, the running at a call
                    await stops.acancel_idle(fresh.pk)
                if app_settings.NETWORK_MEMORY_URL:
                    await blocking(network.memory.clear)  # the turn's shared keys, for every process
            if claim is not None:  # its row was queued claimed by this job, which runs it now
                claim.row, claim.turn = queued[0], fresh
                return []
            return [row.pk for row in queued]
        if begin is not None:
            return []  # another job of the same turn row began it
    else:
        raise RuntimeError(f"Network turn {public_run_id(turn)} changed {ADVANCE_ATTEMPTS} times while this worker "
                           "advanced it")
    if outcome is not None and not await blocking(save_row, *outcome):  # the task was cancelled as it finished
        kept = ("messages", "input_tokens", "output_tokens", "cost", "duration")
        await watch.astop_cancelled(outcome[0], {key: outcome[1][key] for key in kept if key in outcome[1]})
    return []


class _Duplicate(Exception):
    """The change was applied already (a duplicate delivery)."""


def _fail_routing(state: TurnState, error: Exception) -> None:
    """Routing raised (an unknown task, a bad answer): the turn fails with that error."""
    state.errors[_ROUTING] = f"{type(error).__name__}: {error}"


async def _announce(turn: ResultRow, state: TurnState, network: Network) -> None:
    """``run.completed`` (or ``run.failed``) and ``stream.ended`` for the finished turn."""
    if turn.status == Status.COMPLETED:
        final = (RUN_COMPLETED, {"network": network.name, "reply": turn.reply, "tasks": list(state.results)})
    else:
        final = (RUN_FAILED, {"network": network.name, "error": turn.error, "error_type": turn.error_type})
    await _emit(turn, final, (STREAM_ENDED, {}))
    if turn.status == Status.FAILED:
        logger.warning("robotlab: network %r failed on thread %s: %s: %s", turn.robot_name, turn.thread_id,
                       turn.error_type, turn.error)


async def astart(turn: ResultRow, network: Network, successor: Successor | None = None) -> list[Any]:
    """Start the claimed ``turn``: ``run.started``, its stored state, and a queued row per ready task.

    Returns:
        The primary keys of the task rows queued to send (``[]`` when another job of the same turn row began it,
        or when its one ready task is left to ``successor``).
    """
    state = network.turn_state()
    await _emit(turn, (RUN_STARTED, {"network": network.name, "message": turn.input or None}),
                first=first_execution(turn))
    return await _settle(turn, network, None, successor=successor, begin=state)


async def aadvance(turn: ResultRow, network: Network, name: str, *, result: FlowResult | None = None,
                   error: BaseException | str | None = None, outcome: tuple[Any, dict[str, Any]] | None = None,
                   successor: Successor | None = None, current: bool = False) -> list[Any]:
    """Record task ``name``'s ``result`` (or ``error``) on the stored turn and move the turn on, once.

    ``outcome``, the task's row and its columns, is stored in the same transaction. When the advance starts
    exactly one task, ``successor`` (if given) gets its row, claimed, for the job to run, instead of the row being
    returned. ``current``: ``turn`` is probably as stored (see ``_settle``).

    Returns:
        The primary keys of the task rows queued to send (``[]`` when the task was not running any more: a
        duplicate).
    """

    def change(state: TurnState) -> None:
        if state.status.get(name) != "running":
            raise _Duplicate
        if error is not None:
            state.fail(name, error)
        else:
            assert result is not None
            state.complete(name, result)

    return await _settle(turn, network, change, outcome, successor, current=current)
