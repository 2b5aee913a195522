"""Dispatching queued runs (``ROBOTLAB["EXECUTOR"]``): the one module that hands runs to be executed.

* ``"thread"`` (the default): once the current transaction commits, the run executes in a
  background thread of this process, which closes its database connections when done.
* ``"sync"``: the run executes at once, in the caller's thread (tests, scripts).
* ``"celery"``: once the transaction commits, :func:`robotlab_django.tasks.run_robot` is sent to
  a Celery worker (:func:`enqueue`; see :mod:`robotlab_django.tasks`).

Only the row's primary key crosses to the executor, never model instances or secrets, so a
queue-based executor can take the same calls. A thread runs one reply at a time
(:mod:`robotlab_django.runs.thread_queue`): a run queued behind an active one is held, and dispatched once the
reply before it ends (:func:`release_next`). Re-running a thread's last message
(:func:`rerun_last_user_message`) and re-queueing stuck runs (:func:`requeue_stuck`) dispatch here too.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections, transaction
from django.dispatch import receiver

from robotlab.errors import RobotLabError
from robotlab_django import swappable
from robotlab_django.accounting import budgets
from robotlab_django.conf import app_settings
from robotlab_django.networks import distributed as network_turns
from robotlab_django.runs import thread_queue
from robotlab_django.runs.claims import release_stuck
from robotlab_django.runs.records import get_thread, start_run
from robotlab_django.runs.runner import deliver, execute_run
from robotlab_django.tracing import links, propagation

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult, Thread

__all__ = ["EXECUTORS", "NothingToRerunError", "dispatch", "enqueue", "join", "release_next", "requeue_stuck",
           "rerun_last_user_message"]

logger = logging.getLogger("robotlab_django")

#: The executors this module provides.
EXECUTORS = ("thread", "sync", "celery")

_threads: set[threading.Thread] = set()
_threads_lock = threading.Lock()


class NothingToRerunError(RobotLabError, ValueError):
    """The thread has no user message to run again."""


def _execute_here(pk: int) -> None:
    """Execute the row ``pk`` in this process: a distributed network turn's rows as a job would."""
    if network_turns.distributed_networks():
        deliver(pk)  # it releases the thread's next reply itself
    else:
        row = execute_run(pk, raise_errors=False)
        release_next(row.thread_id)


def release_next(thread_id: Any) -> None:
    """Dispatch the thread's next waiting reply when nothing before it is active (:mod:`.thread_queue`)."""
    pk = thread_queue.next_waiting(thread_id)
    if pk is not None:
        dispatch(pk)


@receiver(thread_queue.reply_ended)
def _reply_ended(sender: Any = None, thread_id: Any = None, **kwargs: Any) -> None:
    """A reply ended in a job (:func:`robotlab_django.runs.runner.deliver`): dispatch the one behind it."""
    if thread_id is not None:
        release_next(thread_id)


@receiver(network_turns.task_rows_queued)
def _dispatch_task_rows(sender: object = None, pks: Iterable[int] = (), **kwargs: object) -> None:
    """Dispatch the task rows a distributed network turn just queued (its tasks whose dependencies are done).

    Every row is tried even when one fails (a locked or dropped database), then the first error is raised: the
    job's retry sends the rows left unsent (:func:`robotlab_django.networks.distributed.resend_unsent`).
    """
    errors: list[Exception] = []
    for pk in pks:
        try:
            dispatch(pk)
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]


def _execute_in_background(pk: int) -> None:
    close_old_connections()
    try:
        _execute_here(pk)
    except Exception:  # the row may be gone, or the database down; never kill the process
        logger.exception("robotlab: background run %s failed", pk)
    finally:
        connections.close_all()
        with _threads_lock:
            _threads.discard(threading.current_thread())


def _start_thread(pk: int) -> None:
    worker = threading.Thread(target=propagation.later(_execute_in_background, pk), name=f"robotlab-run-{pk}",
                              daemon=True)  # the run continues the trace that queued it
    with _threads_lock:
        _threads.add(worker)
    worker.start()


def _send(result_id: int, task_id: str, queue: str) -> None:
    from robotlab_django.tasks import run_robot

    run_robot.apply_async(args=(result_id,), task_id=task_id, queue=queue, headers=propagation.headers() or None)


def enqueue(result: RobotResult | int, *, queue: str | None = None) -> str:
    """Send ``result`` (a row or its primary key) to the Celery task once the transaction commits.

    The row's ``task_id`` is set now, and the current trace context goes in the message's headers
    (:func:`robotlab_django.tracing.propagation.headers`). ``queue`` defaults to ``ROBOTLAB["TASK_QUEUE"]``
    (``"default"``: start workers with ``-Q default`` or set ``CELERY_TASK_DEFAULT_QUEUE = "default"``).

    Returns:
        The Celery task id.
    """
    pk = result if isinstance(result, int) else result.pk
    task_id = uuid.uuid4().hex
    swappable.result_model().objects.filter(pk=pk).update(task_id=task_id)
    if hasattr(result, "task_id"):
        result.task_id = task_id
    chosen = queue or str(app_settings.TASK_QUEUE)
    transaction.on_commit(propagation.later(_send, pk, task_id, chosen), robust=True)  # in this trace context
    return task_id


def dispatch(result: RobotResult | int, *, queue: str | None = None) -> None:
    """Execute the queued ``result`` (a row or its primary key) with the configured executor.

    ``queue`` is the Celery queue (``ROBOTLAB["TASK_QUEUE"]`` when ``None``); other executors ignore it. A reply
    queued behind an active one of its thread is held (:func:`robotlab_django.runs.thread_queue.held`): it is
    dispatched when that one ends.

    Raises:
        ImproperlyConfigured: ``ROBOTLAB["EXECUTOR"]`` names no executor of this module.
    """
    pk = result if isinstance(result, int) else result.pk
    mode = app_settings.EXECUTOR
    if mode in EXECUTORS and thread_queue.held(pk):
        return
    if mode == "sync":
        _execute_here(pk)
    elif mode == "thread":
        transaction.on_commit(propagation.later(_start_thread, pk), robust=True)
    elif mode == "celery":
        enqueue(result, queue=queue)
    else:
        raise ImproperlyConfigured(f"ROBOTLAB['EXECUTOR'] is {mode!r}; choose one of: {', '.join(EXECUTORS)}.")


def join(timeout: float | None = None) -> bool:
    """Wait for the background runs started so far; ``True`` when all of them finished in time."""
    with _threads_lock:
        pending = list(_threads)
    for worker in pending:
        worker.join(timeout)
    return not any(worker.is_alive() for worker in pending)


def requeue_stuck(*, lease: float | None = None, dry_run: bool = False) -> tuple[list[Any], list[Any]]:
    """Re-queue or fail the runs whose worker looks lost.

    A run is stuck when it has been ``running`` for more than ``lease`` seconds (default
    ``ROBOTLAB["RUN_LEASE"]``), or ``queued``/``retrying`` untouched that long (its enqueue was lost:
    the broker was down at commit). A stuck run with attempts left is set ``retrying`` and
    dispatched again; one without is marked failed (:func:`robotlab_django.runs.claims.release_stuck`). Either way
    the daily budget reservations its lost worker held are released (:func:`~.budgets.release_run`).

    Returns:
        The primary keys re-queued and the primary keys failed.
    """
    requeued, failed = release_stuck(lease=lease, dry_run=dry_run)
    if not dry_run:
        for pk in [*requeued, *failed]:  # what the lost worker's model calls reserved in the daily budgets
            budgets.release_run(pk)
        for pk in requeued:
            dispatch(pk)
        for row in swappable.result_model().objects.filter(pk__in=failed, parent__isnull=False):
            network_turns.settle_exhausted(row)  # a network task out of attempts fails its turn
        threads = swappable.result_model().objects.filter(pk__in=failed).values_list("thread_id", flat=True)
        for thread_id in set(threads):
            release_next(thread_id)  # the reply behind a failed one may run now
    return requeued, failed


def rerun_last_user_message(thread: Thread) -> RobotResult:
    """Queue the thread's last user message again, for the same robot, and dispatch it.

    Returns:
        The new result row (already finished with the ``sync`` executor).

    Raises:
        NothingToRerunError: the thread has no run with a user message.
        UnknownRobotError: that robot is no longer registered (nothing is written).
    """
    thread = get_thread(thread, create=False)
    last = (swappable.result_model().objects.filter(thread_id=thread.pk, delegated_by="").exclude(input="")
            .order_by("-sequence_number").only("robot_name", "input", "attachments", "run_id").first())
    if last is None:
        raise NothingToRerunError(f"Thread {thread.session_id} has no user message to re-run.")
    row = start_run(thread, last.robot_name, last.input, attachments=last.attachments or None)
    with links.rerun(last, row):  # its spans under a span linked to the run it repeats
        dispatch(row)
    return row
