"""Celery: the ``run_robot`` task (``ROBOTLAB["EXECUTOR"] = "celery"``) and its worker-lost signal.

The task is thin: it takes the primary key of a ``queued`` :class:`~robotlab_django.models.RobotResult`
(never secrets or model instances) and calls :func:`robotlab_django.runner.deliver`, whose claim
(:mod:`robotlab_django.claims`) makes a second delivery of the same run a no-op. Delivery is at least
once (``acks_late`` and ``reject_on_worker_lost``: a killed worker's run is delivered again), and
the ``attempts`` column bounds it: a run claimed ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` times is marked
failed instead of looping. When a worker's pool child dies mid-run, the worker sends the task again
as a retry (``retry_on_worker_lost``, Celery 5.6+); a retry knows the earlier execution is over, so
it takes the run over from ``running`` and executes it again (its events are numbered after the
stored ones, and a second ``run.started`` tells clients to start its text again). So does a
redelivery (the broker's ``visibility_timeout`` passed: the whole worker was lost) of a run
``running`` for longer than ``ROBOTLAB["RUN_LEASE"]``. Any other delivery of a ``running`` run is a
duplicate and does nothing.

One retry layer only. Transient LLM errors are retried by the LLM client
(``ROBOTLAB["LLM_MAX_RETRIES"]``); a robot that fails (a ``ConfigurationError``, an exhausted
``InferenceError``, a tool loop...) is stored as ``failed`` and the task does not retry it. The task
retries only when the database itself is unreachable (``OperationalError``/``InterfaceError``,
twice, 5 s apart). A run whose whole worker node vanished stays ``running``;
:func:`robotlab_django.executor.requeue_stuck` (``manage.py robotlab_requeue_stuck``, run it from cron
or celery beat) re-queues it once ``ROBOTLAB["RUN_LEASE"]`` seconds have passed, or fails it when its
attempts are used up. Runs are sent to this task by :mod:`robotlab_django.executor` only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from celery import shared_task
from celery.exceptions import WorkerLostError
from celery.signals import task_failure
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from . import network_turns, swappable
from .claims import fail_exhausted
from .runner import deliver

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
def run_robot(self: Any, result_id: int) -> dict[str, Any]:
    """Run the queued robot result ``result_id`` (see :func:`robotlab_django.runner.deliver`).

    A duplicate delivery does nothing.
    """
    return deliver(result_id, retried=bool(self.request.retries),
                   redelivered=bool((self.request.delivery_info or {}).get("redelivered")))


@task_failure.connect
def _worker_lost(sender: Any = None, exception: BaseException | None = None, args: Any = None,
                 **kwargs: Any) -> None:
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
        network_turns.settle_exhausted(row)  # a network task out of attempts fails its turn
    elif row is not None:
        logger.warning("robotlab: run %s lost its worker after %s attempts; robotlab_requeue_stuck will re-queue it",
                       row.pk, row.attempts)
