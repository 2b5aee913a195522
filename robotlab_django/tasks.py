"""Celery: the ``run_robot`` task (``ROBOTLAB["EXECUTOR"] = "celery"``) and its worker-lost signal.

Importing it (Celery does, at a worker's start) also connects the worker's warm-up
(:mod:`robotlab_django.workers.warm_up`).

The task is thin: it takes the primary key of a ``queued`` :class:`~robotlab_django.models.RobotResult`
(never secrets or model instances) and calls :func:`robotlab_django.runs.runner.deliver`, whose claim
(:mod:`robotlab_django.runs.claims`) makes a second delivery of the same run a no-op. Delivery is at least
once (``acks_late`` and ``reject_on_worker_lost``: a killed worker's run is delivered again), and
the ``attempts`` column bounds it: a run claimed ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` times is marked
failed instead of looping. When a worker's pool child dies mid-run, the worker sends the task again
as a retry (``retry_on_worker_lost``, Celery 5.6+). As it sends it, the worker releases the run
(:func:`robotlab_django.runs.claims.release_ended`: the claim names a process of this node that is gone), so
the retry claims it and executes it again (its events are numbered after the stored ones, and a second
``run.started`` tells clients to start its text again). A retry or a redelivery (the broker's
``visibility_timeout`` passed: the whole worker was lost) also takes over a run ``running`` for longer
than ``ROBOTLAB["RUN_LEASE"]``. Any other delivery of a ``running`` run, a duplicated retry message
included, is a duplicate and does nothing: the run is never executed twice at once.

One retry layer only. Transient LLM errors are retried by the LLM client
(``ROBOTLAB["LLM_MAX_RETRIES"]``); a robot that fails (a ``ConfigurationError``, an exhausted
``InferenceError``, a tool loop...) is stored as ``failed`` and the task does not retry it. The task
retries only when the database itself is unreachable (``OperationalError``/``InterfaceError``,
twice, 5 s apart). A run whose whole worker node vanished stays ``running``;
:func:`robotlab_django.runs.executor.requeue_stuck` (``manage.py robotlab_requeue_stuck``, run it from cron
or celery beat) re-queues it once ``ROBOTLAB["RUN_LEASE"]`` seconds have passed, or fails it when its
attempts are used up. Runs are sent to this task by :mod:`robotlab_django.runs.executor` only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from celery import shared_task
from celery.exceptions import WorkerLostError
from celery.signals import task_failure, task_retry
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from robotlab_django import swappable
from robotlab_django.networks import distributed
from robotlab_django.networks.inline import release_rows_of_message
from robotlab_django.runs.claims import fail_exhausted, release_ended
from robotlab_django.runs.runner import deliver
from robotlab_django.tracing import propagation
from robotlab_django.workers import warm_up  # noqa: F401  (its receivers warm each worker process up)

if TYPE_CHECKING:
    from celery import Task
    from celery.app.task import Context

__all__ = ["LOST_WORKER_DELAY", "RETRY_DELAY", "run_robot"]

logger = logging.getLogger("robotlab_django")

#: Seconds between the task's retries when the database is unreachable.
RETRY_DELAY = 5
#: Seconds before a run whose worker's pool child died is sent again.
LOST_WORKER_DELAY = 1


#: ``shared_task`` as celery-types would have it, but for ``retry_on_worker_lost`` (Celery 5.6+), which its
#: overloads do not know yet.
_shared_task = cast(Callable[..., Callable[[Callable[..., Any]], Any]], shared_task)


@_shared_task(bind=True, name="robotlab_django.tasks.run_robot", acks_late=True, reject_on_worker_lost=True,
             retry_on_worker_lost=True, autoretry_for=(OperationalError, InterfaceError), max_retries=2,
             retry_kwargs={"countdown": RETRY_DELAY}, default_retry_delay=LOST_WORKER_DELAY, retry_backoff=False)
def run_robot(self: Task[[int], dict[str, Any]], result_id: int) -> dict[str, Any]:
    """Run the queued robot result ``result_id`` (see :func:`robotlab_django.runs.runner.deliver`).

    A duplicate delivery does nothing. The job runs in a span continuing the trace of whoever queued it
    (:func:`robotlab_django.tracing.propagation.job`).
    """
    with propagation.job(self.request, result_id):
        return deliver(result_id, retried=bool(self.request.retries),
                       redelivered=bool((self.request.delivery_info or {}).get("redelivered")))


@task_retry.connect
def _retrying(sender: object = None, request: Context | None = None, **kwargs: object) -> None:
    """A retry of ``run_robot`` is being sent: release its run now if the attempt that claimed it is over.

    In the worker's main process when a pool child died (the claim names a process that is gone), in the
    child when the task raised (the claim names this process, which no longer executes it). The retry then
    claims the run at once; a run claimed by a live process elsewhere is left to its lease.
    """
    if getattr(sender, "name", None) != run_robot.name or request is None or not request.args:
        return
    if not connection.in_atomic_block:  # the main process runs no tasks: its connection may be stale
        close_old_connections()
    try:
        release_ended(request.args[0], str(request.hostname or ""))
        release_rows_of_message(str(request.id or ""), str(request.hostname or ""))  # the rows its job ran itself
    except (OperationalError, InterfaceError) as exc:  # the database is down: the lease releases it later
        logger.warning("robotlab: could not release run %s for its retry: %s", request.args[0], exc)


@task_failure.connect
def _worker_lost(sender: object = None, exception: BaseException | None = None, args: Sequence[int] | None = None,
                 **kwargs: object) -> None:
    """In the worker's main process: the pool child died once more than ``run_robot`` retries.

    Celery then acknowledges the message (it is not requeued), so nothing would run the run again:
    fail it now when its attempts are used up (else ``robotlab_requeue_stuck`` re-queues it later).
    """
    if getattr(sender, "name", None) != run_robot.name or not isinstance(exception, WorkerLostError) or not args:
        return
    if not connection.in_atomic_block:  # the main process runs no tasks: its connection may be stale
        close_old_connections()
    row = swappable.result_model().objects.filter(pk=args[0]).first()
    if row is not None and fail_exhausted(row):
        distributed.settle_exhausted(row)  # a network task out of attempts fails its turn
    elif row is not None:
        logger.warning("robotlab: run %s lost its worker after %s attempts; robotlab_requeue_stuck will re-queue it",
                       row.pk, row.attempts)
