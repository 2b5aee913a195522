"""Network turns across workers: one job per network task, the turn advanced by whichever worker finishes one.

With ``ROBOTLAB["DISTRIBUTED_NETWORKS"]`` on (by default when ``EXECUTOR`` is ``"celery"``) a network turn is
the turn's :class:`~robotlab_django.models.RobotResult` row plus one row per task that runs (``task_name``,
``parent`` = the turn's row, ``delegated_by`` = the network's name, ``run_id`` = ``<turn run_id>.<n>``), and
the turn's scheduling state, a :class:`robotlab.network.TurnState`, is stored on the turn's row
(``turn_state``, with ``turn_version`` bumped by every change):

1. The job of the turn's row (:func:`abegin`) sends ``run.started``, asks the state which tasks are ready
   (the roots; the router when there are none) and stores one ``queued`` row for each. The executor
   dispatches them (:func:`robotlab_django.runs.executor.dispatch_tasks`), so independent branches run at once
   on whichever workers are free. A single ready task is run by the job itself instead (:mod:`~.inline`), its
   row queued already claimed by it: the turn's first task here, a join or a chain's next link after step 3.
2. The job of a task's row (:func:`arun_task`) was claimed like any run (a conditional update: a second
   delivery does nothing), records its worker (hostname and pid), rebuilds the network with the thread's
   history, checkpoints the task's robot on its own row (a re-execution after a lost worker replays its
   completed LLM and tool steps from ``RunStep``; a side-effecting tool call is journaled:
   :mod:`robotlab_django.runs.effects`), and runs that one task (:meth:`robotlab.network.Network.arun_task`)
   on the input the state gives it (its dependencies' results, as in one process), for the turn's user (its
   tools get the turn's :class:`~robotlab_django.RunDeps`). Its events (``step.*`` and its robot's, tagged
   ``task`` and ``robot``) carry the turn's ``run_id`` and are stored under the task's row, numbered from a
   block of its own (:data:`SEQ_BLOCK` per task) so the turn's events stay unique and each task's stay in order.
3. It advances the turn (:func:`robotlab_django.networks.advance.aadvance`): ``complete`` (or ``fail``) on the
   stored state, then its own row, the next ready tasks, their rows, and the state, all applied in one
   transaction with one conditional update over the version it read, so two tasks finishing at once on two
   workers each apply their result once and every next task gets exactly one row (the loser reads the state
   again and retries). A database error (:data:`DATABASE_ERRORS`) stores none of it: the job's retry runs the
   task again from its checkpoints.
4. When the state is done the same update finishes the turn's row (the final reply, the chat messages
   ``[user, assistant]``), and ``run.completed`` (or ``run.failed``) and ``stream.ended`` go out once.

A task row that used up ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` fails the turn with an error naming the task
(:func:`settle_exhausted`). With the feature off, a network turn runs in one process
(:class:`robotlab_django.networks.turn.NetworkTurn`), through the same state machine.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from django.db import InterfaceError, OperationalError
from django.dispatch import Signal

from robotlab.memory import create_memory
from robotlab.network import Network, TurnState
from robotlab.robot import Robot
from robotlab.streaming import Event
from robotlab.tools.approval import ParkingApprover
from robotlab.tools.parking import ParkingChannel, RunParked
from robotlab_django.abstract_models import Status
from robotlab_django.accounting import admission
from robotlab_django.accounting.budgets import DatabaseLedger
from robotlab_django.conf import app_settings
from robotlab_django.networks import built, inline, stops
from robotlab_django.networks.advance import FINISHED, aadvance, astart, load
from robotlab_django.networks.inline import Successor
from robotlab_django.networks.task_outcomes import listener, paid, task_fields
from robotlab_django.registry import registry
from robotlab_django.runs import checkpoints, claims, effects, watch
from robotlab_django.runs.deps import InactiveUserError, for_row
from robotlab_django.runs.history import load_history
from robotlab_django.runs.records import current_worker, first_execution, save_row
from robotlab_django.runs.runnables import build_network
from robotlab_django.runs.sync_bridge import blocking, call_sync
from robotlab_django.streaming.event_stream import SEQ_BLOCK, astream_run, publish_failure
from robotlab_django.tracing import propagation
from robotlab_django.tracing.runs import traced

if TYPE_CHECKING:
    from robotlab.llm import LLM
    from robotlab_django.models import RobotResult

__all__ = ["DATABASE_ERRORS", "MEMORY_TTL", "SEQ_BLOCK", "abegin", "aexecute", "arun_task", "distributed_networks",
           "execute", "is_distributed", "resend_unsent", "rows_of_message", "settle_exhausted", "task_rows_queued"]

logger = logging.getLogger("robotlab_django")

#: Seconds the keys of a turn's shared memory live after their last write (they are cleared when it ends).
MEMORY_TTL = 24 * 3600

#: Errors of the database itself (unreachable, locked): a job that meets one is retried, its turn does not fail.
DATABASE_ERRORS = (OperationalError, InterfaceError)
#: Sent (``pks``: the task rows just queued, committed) by :func:`execute` and :func:`settle_exhausted`, from
#: sync code; :mod:`robotlab_django.runs.executor` dispatches them.
task_rows_queued = Signal()


def distributed_networks() -> bool:
    """Whether network turns run one job per task (``ROBOTLAB["DISTRIBUTED_NETWORKS"]``.

    ``None``: when the executor is ``"celery"``).
    """
    chosen = app_settings.DISTRIBUTED_NETWORKS
    return app_settings.EXECUTOR == "celery" if chosen is None else bool(chosen)


def is_distributed(row: RobotResult) -> bool:
    """Whether ``row`` is a task row of a distributed turn, or a network turn to run distributed."""
    if getattr(row, "parent_id", None) is not None and row.task_name:
        return True
    return bool(row.turn_state) or (distributed_networks() and registry.is_network(row.robot_name))


def _network(turn: RobotResult, llm: LLM | None, options: Mapping[str, Any] | None,
             task: str | None = None) -> tuple[Network, int]:
    """The turn's network for a job that runs ``task`` (``None``: the turn's start), and its history's length.

    Every robot holds the thread's history before the turn. It is the network this process built for the turn
    when the job's robot is still untouched (:mod:`~.built`; not with a job's own ``llm`` or ``options``), else
    one built now. Its memory is the turn's shared one when ``ROBOTLAB["NETWORK_MEMORY_URL"]`` is set.
    """
    if llm is None and not options:
        network, length = built.take(turn, task, lambda: _build(turn, None, None))
    else:
        network, length = _build(turn, llm, options)
    url = app_settings.NETWORK_MEMORY_URL
    if url:
        network.memory = create_memory(backend="redis", redis_url=url, namespace=f"robotlab-turn-{turn.run_id}",
                                       network_name=network.name, ttl=MEMORY_TTL)
    return network, length


def _build(turn: RobotResult, llm: LLM | None, options: Mapping[str, Any] | None) -> tuple[Network, int]:
    """The turn's network, freshly built, every robot holding the thread's history before the turn."""
    network = build_network(turn.robot_name, llm=llm, **dict(options or {}))
    if network.budget is not None:  # the network's budget covers the turn's tasks on every worker
        network.budget.ledger = DatabaseLedger(scope=f"network:{turn.run_id}", day=turn.created_at.date(),
                                               limits=network.budget.ledger.limits)
    # the first run of its thread has no history to read
    history = load_history(turn.thread_id, before=turn.sequence_number) if turn.sequence_number > 1 else []
    for task in network.tasks.values():
        if isinstance(task.robot, Robot):
            task.robot.replace_messages(history)
    return network, len(history)


def _admit(turn: RobotResult) -> None:
    """Refuse the turn when a daily budget of its network or its user is spent (:mod:`~.admission`)."""
    gate = admission.gate_for(turn)
    if gate is not None:
        gate.admit()


async def abegin(row: RobotResult, *, llm: LLM | None = None, options: Mapping[str, Any] | None = None,
                 successor: Successor | None = None) -> list[Any]:
    """Start the claimed turn ``row``: ``run.started``, its state, and a queued row per ready task.

    A turn row claimed again (its lease ran out while its tasks ran) has a state already: nothing is redone.
    A single ready task is left to ``successor`` when one is given (:mod:`~.inline`).

    Returns:
        The primary keys of the task rows queued to send.
    """
    if row.turn_state:
        return []
    await blocking(_admit, row)  # a spent daily budget refuses the turn before any task runs
    network, _length = await blocking(_network, row, llm, options)
    try:
        return await astart(row, network, successor)
    finally:
        _closing(network)


async def arun_task(row: RobotResult, *, llm: LLM | None = None, options: Mapping[str, Any] | None = None,
                    on_event: Callable[[Event], Any] | None = None, turn: RobotResult | None = None,
                    successor: Successor | None = None) -> list[Any]:
    """Run the claimed task ``row`` of a distributed turn, store it, and advance the turn (module docs, 2-3).

    The row ends ``completed``, ``failed``, or ``skipped`` when its turn had ended meanwhile. ``turn`` is the turn's
    row when the caller has just read it (else it is read here); a single task the advance starts is left to
    ``successor`` when one is given (:mod:`~.inline`).

    Returns:
        The primary keys of the task rows the advance queued to send.
    """
    started = time.monotonic()
    assert row.parent_id is not None, "a task row has its turn's"
    if turn is None:  # read with the row when the job was delivered (claims.admit), with its thread
        turn = cast("RobotResult", row.parent) if type(row).parent.is_cached(row) else await blocking(
            load, row.parent_id)
        if type(row).thread.is_cached(row):  # the turn's owner, for the rollups its advance moves
            setattr(turn, "robotlab_thread_user", row.thread.user_id)  # noqa: B010 - not a field of the model
    name = row.task_name
    state = TurnState.from_dict(turn.turn_state) if turn.turn_state else None
    if turn.status in FINISHED or state is None or state.status.get(name) != "running":
        await blocking(save_row, row, {"status": Status.SKIPPED})
        return []
    alone = state.running == [name]  # nothing else can change the turn: its advance starts from it as read
    network, history_length = await blocking(_network, turn, llm, options, name)
    try:
        robot = network.tasks[name].robot
        try:  # the task's tools act for the thread's owner, read in this job, under the turn's run id
            deps = successor.deps if successor is not None and successor.deps is not None else await blocking(
                for_row, turn, thread=_thread_of(row, turn))
        except InactiveUserError as exc:
            return await aadvance(turn, network, name, error=exc, outcome=(row, {
                "status": Status.FAILED, "error": str(exc), "error_type": type(exc).__name__,
                "duration": time.monotonic() - started}), successor=successor)
        if isinstance(robot, Robot):  # each model call reserves in the daily budgets, under the checkpoints
            admission.attach(robot, await blocking(admission.gate_for, row, robot_name=turn.robot_name))
            log = await blocking(checkpoints.attach, robot, row)
            if log is not None and network.budget is not None:  # a replayed call was counted when it was made
                network.budget = checkpoints.CheckpointedBudget(network.budget, log)
            effects.attach(robot, row, deps)  # a side effect happens once, whatever dies
            stops.guard(robot, row, checked=True)  # no call once the turn ended (its status was read just now)
            robot.ask_channel = ParkingChannel(row.answers or [])
            robot.approver = ParkingApprover(row.answers or [])
        base = (1 + list(state.dependencies).index(name)) * SEQ_BLOCK
        inputs: dict[str, str] = {}
        failures: dict[str, tuple[str, str]] = {}
        usage: dict[str, dict[str, Any]] = {}
        try:
            flow = await watch.watch(row, astream_run(
                turn.thread_id, row.pk,
                lambda callback: network.arun_task(name, state, turn.input or None, run_id=turn.run_id, deps=deps,
                                                   on_event=listener(callback, base, inputs, failures, usage),
                                                   **({"attachments": turn.attachments} if turn.attachments else {})),
                on_event=on_event, first=first_execution(row), block=base))
        except RunParked as parked:  # the task row (and its turn) wait for the answer; no process does
            await blocking(watch.park, row, parked.request.to_dict())
            return []
        except watch.RunCancelledError:
            await watch.astop_cancelled(row, {"duration": time.monotonic() - started, **paid(usage)})
            return []
        except DATABASE_ERRORS:
            raise  # the database, not the task: the job's retry takes the row over and runs it again
        except Exception as exc:
            failed = {"status": Status.FAILED, "error": str(exc) or type(exc).__name__,
                      "error_type": type(exc).__name__, "duration": time.monotonic() - started,
                      **paid(usage)}  # what its calls paid before it failed, on its row and in the rollups
            return await aadvance(turn, network, name, error=exc, outcome=(row, failed), successor=successor,
                                  current=alone)
        fields = task_fields(turn.robot_name, flow, robot, history_length, inputs, failures,
                              time.monotonic() - started)
        if successor is not None:
            successor.deps = deps  # the next task this job runs acts for the same user
        return await aadvance(turn, network, name, result=flow, outcome=(row, fields), successor=successor,
                              current=alone)
    finally:
        _closing(network)


def _thread_of(*rows: RobotResult) -> Any:
    """The thread read with one of ``rows`` (their delivery reads it with the row), else ``None``."""
    return next((row.thread for row in rows if type(row).thread.is_cached(row)), None)


def settle_exhausted(row: RobotResult) -> list[Any]:
    """Fail the turn of the task ``row`` that used up its attempts, naming the task (sync code only).

    Returns:
        The task rows queued (none: the turn fails), after :data:`task_rows_queued` was sent.
    """
    if row.parent_id is None or row.status != Status.FAILED or row.error_type != "AttemptsExhausted":
        return []
    turn = load(row.parent_id)
    network, _length = _build(turn, None, None)
    error = (f"AttemptsExhausted: gave up after {row.attempts} attempts "
             f"(ROBOTLAB['TASK_MAX_ATTEMPTS'] is {app_settings.TASK_MAX_ATTEMPTS}); its worker was lost each time")
    try:
        return _announce_queued(type(row), call_sync(aadvance, turn, network, row.task_name, error=error))
    finally:
        _closing(network)


async def aexecute(row: RobotResult, *, llm: LLM | None = None, options: Mapping[str, Any] | None = None,
                   on_event: Callable[[Event], Any] | None = None, successor: Successor | None = None) -> list[Any]:
    """Run the claimed distributed ``row``: start its turn (a turn's row) or run its task (a task's row).

    Then, while an advance leaves exactly one task ready, run that one too (``ROBOTLAB["NETWORK_INLINE_TASKS"]``:
    :mod:`~.inline`), claimed like any row, in a job span of its own; the rows it queues are sent from there. A
    ``successor`` given (when the setting is on) is the one the job uses (it says whether the job ended the turn).

    Returns:
        The primary keys of the task rows ``row``'s own step queued, for the executor to dispatch.
    """
    if successor is None and app_settings.NETWORK_INLINE_TASKS:
        successor = Successor(task_id=row.task_id or "")
    with traced(row):  # ROBOTLAB["TRACES"]: the job's spans are kept on its row
        if row.parent_id is not None:
            queued = await arun_task(row, llm=llm, options=options, on_event=on_event, successor=successor)
        else:
            queued = await abegin(row, llm=llm, options=options, successor=successor)
    while successor is not None and (taken := successor.take()) is not None:
        task, turn = taken  # its row was queued claimed by this job, in the advance's transaction
        # a job of its own in the turn's trace, inside this one
        span = await blocking(propagation.start_inline, task.pk) if propagation.traces_jobs() else None
        with claims.executing(task.pk), traced(task), propagation.running(span):
            try:
                sent = await arun_task(task, llm=llm, options=options, on_event=on_event, turn=turn,
                                       successor=successor)
                if sent:  # from its span (the context): the jobs of the rows it queued are its children
                    await blocking(contextvars.copy_context().run, _announce_queued, type(task), sent)
            except DATABASE_ERRORS:
                raise  # the job's retry takes the task's row over (inline.rows_of_message) and runs it again
            except Exception as exc:  # its network could not be built: the task fails, and so does its turn
                await blocking(_fail, task, exc)
    return queued


def _closing(network: Network) -> None:
    """Stop this process listening to the turn's shared memory (its keys stay for the other tasks)."""
    if app_settings.NETWORK_MEMORY_URL:
        network.memory.close()


def execute(row: RobotResult, *, llm: LLM | None = None, options: Mapping[str, Any] | None = None,
            on_event: Callable[[Event], Any] | None = None) -> tuple[Any, list[Any]]:
    """Claim ``row`` (a second delivery does nothing) and :func:`aexecute` it, from sync code.

    Then send :data:`task_rows_queued` with the rows it queued.

    Returns:
        ``(row, queued primary keys)``.
    """
    worker, pid = current_worker()  # here: Celery's current task is known in the job's own thread only
    if not claims.claim(row, worker=worker, worker_pid=pid):
        return row, []
    successor = Successor(task_id=row.task_id or "") if app_settings.NETWORK_INLINE_TASKS else None
    try:
        queued = call_sync(aexecute, row, llm=llm, options=options, on_event=on_event, successor=successor)
    except DATABASE_ERRORS:
        raise  # the task's outcome and the turn's state are not stored: the job's retry runs the row again
    except Exception as exc:  # the network could not be built or started: the row fails, and so does its turn
        _fail(row, exc)
        return row, []
    if row.parent_id is None and (successor is None or successor.finished):  # a task row's job stored its row
        row.refresh_from_db()  # (and the instance); a turn's job knows when it ended its turn
    return row, _announce_queued(type(row), queued)


def _fail(row: RobotResult, exc: Exception) -> None:
    """The claimed ``row`` (a turn's or a task's) could not be run: it fails, and so does its turn."""
    error, error_type = str(exc) or type(exc).__name__, type(exc).__name__
    save_row(row, {"status": Status.FAILED, "error": error, "error_type": error_type})
    logger.warning("robotlab: distributed row %s failed: %s: %s", row.pk, error_type, error, exc_info=exc)
    turn = row if row.parent_id is None else load(row.parent_id)
    if turn is not row:
        error = f"Task '{row.task_name}' of network '{turn.robot_name}' failed: {error}"
        if type(turn).objects.filter(pk=turn.pk).exclude(status__in=FINISHED).exists():
            save_row(turn, {"status": Status.FAILED, "error": error, "error_type": error_type})
    publish_failure(turn, error, error_type)


def resend_unsent(row: RobotResult) -> list[Any]:
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


def rows_of_message(row: RobotResult) -> list[Any]:
    """The unfinished task rows the job of ``row``'s message ran itself (:func:`~.inline.rows_of_message`)."""
    return inline.rows_of_message(row) if is_distributed(row) else []


def _announce_queued(sender: type[RobotResult], queued: list[Any]) -> list[Any]:
    if queued:
        task_rows_queued.send(sender=sender, pks=list(queued))
    return queued
