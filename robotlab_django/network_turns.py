"""Network turns across workers: one job per network task, the turn advanced by whichever worker finishes one.

With ``ROBOTLAB["DISTRIBUTED_NETWORKS"]`` on (by default when ``EXECUTOR`` is ``"celery"``) a network turn is
the turn's :class:`~robotlab_django.models.RobotResult` row plus one row per task that runs (``task_name``,
``parent`` = the turn's row, ``delegated_by`` = the network's name, ``run_id`` = ``<turn run_id>.<n>``), and
the turn's scheduling state, a :class:`robotlab.network.TurnState`, is stored on the turn's row
(``turn_state``, with ``turn_version`` bumped by every change):

1. The job of the turn's row (:func:`abegin`) sends ``run.started``, asks the state which tasks are ready
   (the roots; the router when there are none) and stores one ``queued`` row for each. The executor
   dispatches them (:func:`robotlab_django.executor.dispatch_tasks`), so independent branches run at once
   on whichever workers are free.
2. The job of a task's row (:func:`arun_task`) was claimed like any run (a conditional update: a second
   delivery does nothing), records its worker (hostname and pid), rebuilds the network with the thread's
   history, checkpoints the task's robot on its own row (a re-execution after a lost worker replays its
   completed LLM and tool steps from ``RunStep``), and runs that one task
   (:meth:`robotlab.network.Network.arun_task`) on the input the state gives it (its dependencies' results,
   as in one process). Its events (``step.*`` and its robot's, tagged ``task`` and ``robot``) carry the
   turn's ``run_id`` and are stored under the task's row, numbered from a block of its own
   (:data:`SEQ_BLOCK` per task) so the turn's events stay unique and each task's stay in order.
3. It advances the turn (:func:`aadvance`): ``complete`` (or ``fail``) on the stored state, then its own
   row, the next ready tasks, their rows, and the state, all applied in one transaction with one conditional
   update over the version it read, so two tasks finishing at once on two workers each apply their result once
   and every next task gets exactly one row (the loser reads the state again and retries). A database error
   (:data:`DATABASE_ERRORS`) stores none of it: the job's retry runs the task again from its checkpoints.
4. When the state is done the same update finishes the turn's row (the final reply, the chat messages
   ``[user, assistant]``), and ``run.completed`` (or ``run.failed``) and ``stream.ended`` go out once.

A task row that used up ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` fails the turn with an error naming the task
(:func:`settle_exhausted`). With the feature off, a network turn runs in one process
(:class:`robotlab_django.networks.NetworkTurn`), through the same state machine.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from django.db import InterfaceError, OperationalError, transaction
from django.dispatch import Signal
from django.utils import timezone

from robotlab.memory import create_memory
from robotlab.network import Network, TurnState
from robotlab.result import RobotResult
from robotlab.robot import Robot
from robotlab.streaming import (
    RUN_COMPLETED,
    RUN_FAILED,
    RUN_STARTED,
    STEP_COMPLETED,
    STEP_FAILED,
    STREAM_ENDED,
    Event,
)
from robotlab.task import FlowResult
from robotlab.tools.parking import ParkingChannel, RunParked

from . import checkpoints, claims, rollups, run_watch, swappable
from .abstract_models import Status
from .budgets import DatabaseLedger
from .chat_history import load_history
from .conf import app_settings
from .event_stream import astream_run, publish_failure
from .records import append_results, current_worker, outcome_fields, reply_text, save_row
from .registry import registry
from .runnables import build_network
from .sync_bridge import blocking, call_sync

__all__ = ["ADVANCE_ATTEMPTS", "DATABASE_ERRORS", "MEMORY_TTL", "SEQ_BLOCK", "aadvance", "abegin", "aexecute",
           "arun_task", "distributed_networks", "execute", "is_distributed", "resend_unsent", "settle_exhausted",
           "task_rows_queued"]

logger = logging.getLogger("robotlab_django")

#: Event numbers of the ``n``-th task of a turn start at ``n * SEQ_BLOCK`` (the turn's own events below).
SEQ_BLOCK = 100_000
#: Seconds the keys of a turn's shared memory live after their last write (they are cleared when it ends).
MEMORY_TTL = 24 * 3600
#: Times an advance re-reads the turn after another worker changed it first.
ADVANCE_ATTEMPTS = 50
_ROBOT_LIFECYCLE = (RUN_STARTED, RUN_COMPLETED, RUN_FAILED)
_ROUTING = "(routing)"  # the key of a routing error among the state's errors
_FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

#: Errors of the database itself (unreachable, locked): a job that meets one is retried, its turn does not fail.
DATABASE_ERRORS = (OperationalError, InterfaceError)
#: Sent (``pks``: the task rows just queued, committed) by :func:`execute` and :func:`settle_exhausted`, from
#: sync code; :mod:`robotlab_django.executor` dispatches them.
task_rows_queued = Signal()


def distributed_networks() -> bool:
    """Whether network turns run one job per task (``ROBOTLAB["DISTRIBUTED_NETWORKS"]``.

    ``None``: when the executor is ``"celery"``).
    """
    chosen = app_settings.DISTRIBUTED_NETWORKS
    return app_settings.EXECUTOR == "celery" if chosen is None else bool(chosen)


def is_distributed(row: Any) -> bool:
    """Whether ``row`` is a task row of a distributed turn, or a network turn to run distributed."""
    if getattr(row, "parent_id", None) is not None and row.task_name:
        return True
    return bool(row.turn_state) or (distributed_networks() and registry.is_network(row.robot_name))


def _network(turn: Any, llm: Any, options: Mapping[str, Any] | None) -> tuple[Network, int]:
    """The turn's network, freshly built, every robot holding the thread's history before the turn.

    Its memory the turn's shared one when ``ROBOTLAB["NETWORK_MEMORY_URL"]`` is set.
    """
    network = build_network(turn.robot_name, llm=llm, **dict(options or {}))
    url = app_settings.NETWORK_MEMORY_URL
    if url:
        network.memory = create_memory(backend="redis", redis_url=url, namespace=f"robotlab-turn-{turn.run_id}",
                                       network_name=network.name, ttl=MEMORY_TTL)
    if network.budget is not None:  # the network's budget covers the turn's tasks on every worker
        network.budget.ledger = DatabaseLedger(scope=f"network:{turn.run_id}", day=turn.created_at.date(),
                                               limits=network.budget.ledger.limits)
    history = load_history(turn.thread_id, before=turn.sequence_number)
    for task in network.tasks.values():
        if isinstance(task.robot, Robot):
            task.robot.replace_messages(history)
    return network, len(history)


async def _emit(turn: Any, *events: tuple[str, dict[str, Any]]) -> None:
    """Store and send the turn's own events (``run.*``, ``stream.ended``) under its row."""

    async def start(callback: Callable[[Event], Any]) -> None:
        for seq, (kind, data) in enumerate(events, 1):
            callback(Event(kind=kind, run_id=turn.run_id, seq=seq, ts=time.time(), data=data))

    await astream_run(turn.thread_id, turn.pk, start)


# -- the turn's rows ---------------------------------------------------------------------------------------
def _load(pk: Any) -> Any:
    return swappable.result_model().objects.get(pk=pk)


def _commit(turn: Any, version: int, state: TurnState, started: list[str], network: Network,
            finish: dict[str, Any] | None, outcome: tuple[Any, dict[str, Any]] | None = None) -> list[Any] | None:
    """Apply ``state`` over ``version``.

    Store it with the ``outcome`` (a task row and its columns) that changed it, add a queued row per started task,
    finish the turn when ``finish`` is given. The new rows' primary keys; ``None`` when another worker changed the
    turn first (nothing is written).
    """
    model = type(turn)
    now = timezone.now()
    with transaction.atomic(), rollups.batch():
        fields: dict[str, Any] = {"turn_state": state.to_dict(), "turn_version": version + 1, "updated_at": now}
        if finish is None:
            fields["started_at"] = now  # the lease measures how long the turn has not moved
        if not model.objects.filter(pk=turn.pk, turn_version=version).update(**fields):
            return None
        if outcome is not None:
            save_row(*outcome)
        queued: list[Any] = []
        if started:
            thread = swappable.thread_model().objects.get(pk=turn.thread_id)
            count = model.objects.filter(parent_id=turn.pk).count()
            rows = append_results(thread, [
                {"robot_name": str(getattr(network.tasks[name].robot, "name", name)), "task_name": name,
                 "parent_id": turn.pk, "delegated_by": turn.robot_name, "run_id": f"{turn.run_id}.{index}",
                 "status": Status.QUEUED} for index, name in enumerate(started, count + 1)])
            queued = [row.pk for row in rows]
        if finish is not None:
            save_row(turn, finish)
    turn.turn_state, turn.turn_version = fields["turn_state"], version + 1
    return queued


def _finish_fields(turn: Any, state: TurnState, network: Network,
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


async def _settle(turn: Any, network: Network, change: Callable[[TurnState], None] | None,
                  outcome: tuple[Any, dict[str, Any]] | None = None) -> list[Any]:
    """Apply ``change`` to the stored state, advance it and commit, retrying over other workers' changes.

    ``outcome`` (a task row and its columns) is stored in the same transaction as the state it changes, so a
    database error leaves both as they were: the task is still running, and the job's retry runs it again
    (from its checkpoints). When the turn no longer waits for the task, the outcome is stored alone.

    Returns:
        The primary keys of the task rows queued (``[]`` too when ``change`` was a duplicate).
    """
    for _ in range(ADVANCE_ATTEMPTS):
        fresh = await blocking(_load, turn.pk)
        if fresh.status in _FINISHED or not fresh.turn_state:
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
        queued = await blocking(_commit, fresh, fresh.turn_version, state, started, network, finish, outcome)
        if queued is not None:
            if finish is not None:
                await _announce(fresh, state, network)
                if app_settings.NETWORK_MEMORY_URL:
                    await blocking(network.memory.clear)  # the turn's shared keys, for every process
            return queued
    else:
        raise RuntimeError(f"Network turn {turn.pk} changed {ADVANCE_ATTEMPTS} times while this worker advanced it")
    if outcome is not None:
        await blocking(save_row, *outcome)
    return []


class _Duplicate(Exception):
    """The change was applied already (a duplicate delivery)."""


def _fail_routing(state: TurnState, error: Exception) -> None:
    """Routing raised (an unknown task, a bad answer): the turn fails with that error."""
    state.errors[_ROUTING] = f"{type(error).__name__}: {error}"


async def _announce(turn: Any, state: TurnState, network: Network) -> None:
    """``run.completed`` (or ``run.failed``) and ``stream.ended`` for the finished turn."""
    if turn.status == Status.COMPLETED:
        final = (RUN_COMPLETED, {"network": network.name, "reply": turn.reply, "tasks": list(state.results)})
    else:
        final = (RUN_FAILED, {"network": network.name, "error": turn.error, "error_type": turn.error_type})
    await _emit(turn, final, (STREAM_ENDED, {}))
    if turn.status == Status.FAILED:
        logger.warning("robotlab: network %r failed on thread %s: %s: %s", turn.robot_name, turn.thread_id,
                       turn.error_type, turn.error)


# -- the jobs ----------------------------------------------------------------------------------------------
async def abegin(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None) -> list[Any]:
    """Start the claimed turn ``row``: ``run.started``, its state, and a queued row per ready task.

    A turn row claimed again (its lease ran out while its tasks ran) has a state already: nothing is redone.

    Returns:
        The primary keys of the task rows queued.
    """
    if row.turn_state:
        return []
    network, _length = await blocking(_network, row, llm, options)
    try:
        state = network.turn_state()
        await _emit(row, (RUN_STARTED, {"network": network.name, "message": row.input or None}))
        if await blocking(_commit, row, row.turn_version, state, [], network, None) is None:
            return []  # another job of the same turn row began it
        return await _settle(row, network, None)
    finally:
        _closing(network)


def _listener(sink: Callable[[Event], Any], base: int, inputs: dict[str, str],
              failures: dict[str, tuple[str, str]]) -> Callable[[Event], None]:
    """A task's ``on_event``.

    Its robot's ``run.*`` events are left out (its ``step.*`` stand for them, and record the robot's input and
    failure); a failed robot's ``step.completed`` becomes ``step.failed``; every event is numbered from ``base``.
    """

    def listen(event: Event) -> None:
        data = event.data
        if event.kind in _ROBOT_LIFECYCLE:
            robot = str(data.get("robot") or data.get("task"))
            if event.kind == RUN_STARTED:
                inputs[robot] = "" if data.get("message") is None else str(data["message"])
            elif event.kind == RUN_FAILED:
                failures[robot] = (str(data.get("error") or ""), str(data.get("error_type") or ""))
            return
        kind = event.kind
        if kind == STEP_COMPLETED and str(data.get("robot")) in failures:
            error, error_type = failures[str(data.get("robot"))]
            kind, data = STEP_FAILED, {**data, "error": error, "error_type": error_type}
        sink(Event(kind=kind, run_id=event.run_id, seq=base + event.seq, ts=event.ts, data=data))

    return listen


def _task_fields(network: str, flow: FlowResult, robot: Any, history_length: int, inputs: dict[str, str],
                 failures: dict[str, tuple[str, str]], elapsed: float) -> dict[str, Any]:
    """A task row's columns once its task returned ``flow`` (failed when its robot's run failed)."""
    value = flow.value
    messages = robot.messages[history_length:] if isinstance(robot, Robot) else []
    name = str(getattr(robot, "name", ""))
    if isinstance(value, RobotResult):
        fields = outcome_fields(value, messages=messages)
    else:
        fields = {"status": Status.COMPLETED, "reply": reply_text(value), "messages": messages}
    fields.update(input=inputs.get(name, ""), duration=elapsed, delegated_by=network)
    if name in failures:
        error, error_type = failures[name]
        fields.update(status=Status.FAILED, reply="", error=error, error_type=error_type)
    return fields


async def arun_task(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None,
                    on_event: Callable[[Event], Any] | None = None) -> list[Any]:
    """Run the claimed task ``row`` of a distributed turn, store it, and advance the turn (module docs, 2-3).

    The row ends ``completed``, ``failed``, or ``skipped`` when its turn had ended meanwhile.

    Returns:
        The primary keys of the task rows the advance queued.
    """
    started = time.monotonic()
    turn = await blocking(_load, row.parent_id)
    name = row.task_name
    state = TurnState.from_dict(turn.turn_state) if turn.turn_state else None
    if turn.status in _FINISHED or state is None or state.status.get(name) != "running":
        await blocking(save_row, row, {"status": Status.SKIPPED})
        return []
    network, history_length = await blocking(_network, turn, llm, options)
    try:
        robot = network.tasks[name].robot
        if isinstance(robot, Robot):
            await blocking(checkpoints.attach, robot, row)
            robot.ask_channel = ParkingChannel(row.answers or [])
        base = (1 + list(state.dependencies).index(name)) * SEQ_BLOCK
        inputs: dict[str, str] = {}
        failures: dict[str, tuple[str, str]] = {}
        try:
            flow = await run_watch.watch(row, astream_run(
                turn.thread_id, row.pk,
                lambda callback: network.arun_task(name, state, turn.input or None, run_id=turn.run_id,
                                                   on_event=_listener(callback, base, inputs, failures),
                                                   **({"attachments": turn.attachments} if turn.attachments else {})),
                on_event=on_event))
        except RunParked as parked:  # the task row (and its turn) wait for the answer; no process does
            await blocking(run_watch.park, row, parked.request.to_dict())
            return []
        except run_watch.RunCancelledError:
            await run_watch.astop_cancelled(row, {"duration": time.monotonic() - started})
            return []
        except DATABASE_ERRORS:
            raise  # the database, not the task: the job's retry takes the row over and runs it again
        except Exception as exc:
            failed = {"status": Status.FAILED, "error": str(exc) or type(exc).__name__,
                      "error_type": type(exc).__name__, "duration": time.monotonic() - started}
            return await aadvance(turn, network, name, error=exc, outcome=(row, failed))
        fields = _task_fields(turn.robot_name, flow, robot, history_length, inputs, failures,
                              time.monotonic() - started)
        return await aadvance(turn, network, name, result=flow, outcome=(row, fields))
    finally:
        _closing(network)


async def aadvance(turn: Any, network: Network, name: str, *, result: FlowResult | None = None,
                   error: BaseException | str | None = None,
                   outcome: tuple[Any, dict[str, Any]] | None = None) -> list[Any]:
    """Record task ``name``'s ``result`` (or ``error``) on the stored turn and move the turn on, once.

    ``outcome``, the task's row and its columns, is stored in the same transaction.

    Returns:
        The primary keys of the task rows queued (``[]`` when the task was not running any more: a duplicate).
    """

    def change(state: TurnState) -> None:
        if state.status.get(name) != "running":
            raise _Duplicate
        if error is not None:
            state.fail(name, error)
        else:
            assert result is not None
            state.complete(name, result)

    return await _settle(turn, network, change, outcome)


def settle_exhausted(row: Any) -> list[Any]:
    """Fail the turn of the task ``row`` that used up its attempts, naming the task (sync code only).

    Returns:
        The task rows queued (none: the turn fails), after :data:`task_rows_queued` was sent.
    """
    if row.parent_id is None or row.status != Status.FAILED or row.error_type != "AttemptsExhausted":
        return []
    turn = _load(row.parent_id)
    network, _length = _network(turn, None, None)
    error = (f"AttemptsExhausted: gave up after {row.attempts} attempts "
             f"(ROBOTLAB['TASK_MAX_ATTEMPTS'] is {app_settings.TASK_MAX_ATTEMPTS}); its worker was lost each time")
    try:
        return _announce_queued(type(row), call_sync(aadvance, turn, network, row.task_name, error=error))
    finally:
        _closing(network)


async def aexecute(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None,
                   on_event: Callable[[Event], Any] | None = None) -> list[Any]:
    """Run the claimed distributed ``row``: start its turn (a turn's row) or run its task (a task's row).

    Returns:
        The primary keys of the task rows queued, for the executor to dispatch.
    """
    if row.parent_id is not None:
        return await arun_task(row, llm=llm, options=options, on_event=on_event)
    return await abegin(row, llm=llm, options=options)


def _closing(network: Network) -> None:
    """Stop this process listening to the turn's shared memory (its keys stay for the other tasks)."""
    if app_settings.NETWORK_MEMORY_URL:
        network.memory.close()


def execute(row: Any, *, llm: Any = None, options: Mapping[str, Any] | None = None,
            on_event: Callable[[Event], Any] | None = None) -> tuple[Any, list[Any]]:
    """Claim ``row`` (a second delivery does nothing) and :func:`aexecute` it, from sync code.

    Then send :data:`task_rows_queued` with the rows it queued.

    Returns:
        ``(row, queued primary keys)``.
    """
    worker, pid = current_worker()  # here: Celery's current task is known in the job's own thread only
    if not claims.claim(row, worker=worker, worker_pid=pid):
        return row, []
    try:
        queued = call_sync(aexecute, row, llm=llm, options=options, on_event=on_event)
    except DATABASE_ERRORS:
        raise  # the task's outcome and the turn's state are not stored: the job's retry runs the row again
    except Exception as exc:  # the network could not be built or started: the row fails, and so does its turn
        error, error_type = str(exc) or type(exc).__name__, type(exc).__name__
        save_row(row, {"status": Status.FAILED, "error": error, "error_type": error_type})
        logger.warning("robotlab: distributed row %s failed: %s: %s", row.pk, error_type, error, exc_info=exc)
        turn = row if row.parent_id is None else _load(row.parent_id)
        if turn is not row:
            error = f"Task '{row.task_name}' of network '{turn.robot_name}' failed: {error}"
            if type(turn).objects.filter(pk=turn.pk).exclude(status__in=_FINISHED).exists():
                save_row(turn, {"status": Status.FAILED, "error": error, "error_type": error_type})
        publish_failure(turn, error, error_type)
        return row, []
    row.refresh_from_db()
    return row, _announce_queued(type(row), queued)


def resend_unsent(row: Any) -> list[Any]:
    """Dispatch again the task rows of ``row``'s turn that were queued but never sent (sync code only).

    A job's dispatch of the rows it queued can fail after its turn state committed (a locked or dropped
    database): its retry then finds its own row finished and skips it, and without this the rows would wait
    for ``robotlab_requeue_stuck``. A row is unsent while it is ``queued`` with no Celery ``task_id``; one that
    is being sent right now may go twice, and its claim makes the second delivery a no-op.

    Returns:
        The primary keys sent again.
    """
    if not is_distributed(row) or app_settings.EXECUTOR != "celery":
        return []
    turn_pk = row.parent_id if row.parent_id is not None else row.pk
    unsent = type(row).objects.filter(parent_id=turn_pk, status=Status.QUEUED, task_id="").order_by("pk")
    pks = list(unsent.values_list("pk", flat=True))
    if pks:
        logger.warning("robotlab: sending the unsent task rows %s of network turn %s again", pks, turn_pk)
    return _announce_queued(type(row), pks)


def _announce_queued(sender: Any, queued: list[Any]) -> list[Any]:
    if queued:
        task_rows_queued.send(sender=sender, pks=list(queued))
    return queued
