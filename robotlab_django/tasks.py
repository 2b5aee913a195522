"""Celery: the ``run_robot`` task (``ROBOTLAB["EXECUTOR"] = "celery"``) and the recovery of stuck runs.

The task is thin: it takes the primary key of a ``queued`` :class:`~robotlab_django.models.RobotResult`
(never secrets or model instances) and calls :func:`robotlab_django.services.execute_run`, whose
conditional-update claim makes a second delivery of the same run a no-op. Delivery is at least
once (``acks_late`` and ``reject_on_worker_lost``: a killed worker's run is delivered again), and
the ``attempts`` column bounds it: a run claimed ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` times is marked
failed instead of looping. When a worker's pool child dies mid-run, the worker sends the task again
as a retry (``retry_on_worker_lost``, Celery 5.6+); a retry knows the earlier execution is over, so
it takes the run over from ``running`` and executes it again (its events are numbered after the
stored ones, and a second ``run.started`` tells clients to start its text again). So does a
redelivery (the broker's ``visibility_timeout`` passed: the whole worker was lost) of a run
``running`` for longer than ``ROBOTLAB["RUN_LEASE"]``, the lease :func:`requeue_stuck` applies. Any
other delivery of a ``running`` run is a duplicate and does nothing.

One retry layer only. Transient LLM errors are retried by the LLM client
(``ROBOTLAB["LLM_MAX_RETRIES"]``); a robot that fails (a ``ConfigurationError``, an exhausted
``InferenceError``, a tool loop...) is stored as ``failed`` and the task does not retry it. The task
retries only when the database itself is unreachable (``OperationalError``/``InterfaceError``,
twice, 5 s apart). A run whose whole worker node vanished stays ``running``; :func:`requeue_stuck` (``manage.py
robotlab_requeue_stuck``, run it from cron or celery beat) re-queues it once ``ROBOTLAB["RUN_LEASE"]``
seconds have passed, or fails it when its attempts are used up.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import Any

from celery import shared_task
from celery.exceptions import WorkerLostError
from celery.signals import task_failure
from django.db import InterfaceError, OperationalError, close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone

from .abstract_models import Status
from .conf import app_settings
from .streaming import publish_failure

__all__ = ["LOST_WORKER_DELAY", "RETRY_DELAY", "enqueue", "execute", "fail_exhausted", "requeue_stuck", "run_robot"]

logger = logging.getLogger("robotlab_django")

#: Seconds between the task's retries when the database is unreachable.
RETRY_DELAY = 5
#: Seconds before a run whose worker's pool child died is sent again.
LOST_WORKER_DELAY = 1
_WAITING = (Status.QUEUED, Status.RETRYING)


def fail_exhausted(row: Any) -> bool:
    """Mark a waiting ``row`` failed when it used up ``TASK_MAX_ATTEMPTS``; ``True`` when it did."""
    limit = app_settings.TASK_MAX_ATTEMPTS
    if row.attempts < limit:
        return False
    now = timezone.now()
    fields = {"status": Status.FAILED, "error_type": "AttemptsExhausted", "finished_at": now,
              "updated_at": now,
              "error": f"Gave up after {row.attempts} attempts (ROBOTLAB['TASK_MAX_ATTEMPTS'] is {limit}); "
                       "its worker was lost each time."}
    if type(row).objects.filter(pk=row.pk, status__in=[*_WAITING, Status.RUNNING]).update(**fields):
        for name, value in fields.items():
            setattr(row, name, value)
        logger.warning("robotlab: run %s failed after %s attempts", row.pk, row.attempts)
        publish_failure(row, fields["error"], fields["error_type"])
    return True


def _take_over(row: Any) -> None:
    """Set a ``running`` row whose execution is known to be over back to ``retrying``."""
    if row.status == Status.RUNNING and type(row).objects.filter(
            pk=row.pk, status=Status.RUNNING, attempts=row.attempts).update(status=Status.RETRYING,
                                                                           updated_at=timezone.now()):
        row.status = Status.RETRYING
        logger.warning("robotlab: attempt %s of run %s ended unfinished; running it again", row.attempts, row.pk)


def _lease_expired(row: Any) -> bool:
    cutoff = timezone.now() - timedelta(seconds=float(app_settings.RUN_LEASE))
    return row.started_at is not None and row.started_at < cutoff


def execute(result_id: Any, *, retried: bool = False, redelivered: bool = False) -> dict[str, Any]:
    """What :func:`run_robot` does, callable without Celery: claim, run and store the run ``result_id``.

    ``retried`` says the earlier execution of this run is over (the task is a retry: its worker was
    lost, or it raised), so a row left ``running`` by it is taken over and executed again.
    ``redelivered`` (the broker delivers the message again) takes over a row ``running`` for longer
    than ``ROBOTLAB["RUN_LEASE"]`` only, even for a retry: a message redelivered after its
    ``visibility_timeout`` may still be executing elsewhere.

    Returns:
        ``{"result_id", "run_id", "status", "attempts", "skipped"}``; ``skipped`` is true when the
        run was missing, already claimed or finished (a duplicate delivery), or out of attempts.
    """
    from .services import execute_run

    row = app_settings.result_model().objects.filter(pk=result_id).first()
    if row is None:
        logger.warning("robotlab: run %s is gone; dropping its task", result_id)
        return {"result_id": result_id, "run_id": "", "status": "missing", "attempts": 0, "skipped": True}
    if (retried and not redelivered) or (redelivered and _lease_expired(row)):
        _take_over(row)
    skipped = row.status not in _WAITING or fail_exhausted(row)
    if not skipped:
        row = execute_run(row, raise_errors=False)
    return {"result_id": row.pk, "run_id": row.run_id, "status": str(row.status), "attempts": row.attempts,
            "skipped": skipped}


@shared_task(bind=True, name="robotlab_django.tasks.run_robot", acks_late=True, reject_on_worker_lost=True,
             retry_on_worker_lost=True, autoretry_for=(OperationalError, InterfaceError), max_retries=2,
             retry_kwargs={"countdown": RETRY_DELAY}, default_retry_delay=LOST_WORKER_DELAY, retry_backoff=False)
def run_robot(self: Any, result_id: int) -> dict[str, Any]:
    """Run the queued robot result ``result_id`` (see :func:`execute`); a duplicate delivery does nothing."""
    return execute(result_id, retried=bool(self.request.retries),
                   redelivered=bool((self.request.delivery_info or {}).get("redelivered")))


@task_failure.connect
def _worker_lost(sender: Any = None, exception: BaseException | None = None, args: Any = None,
                 **kwargs: Any) -> None:
    """In the worker's main process: the pool child died once more than ``run_robot`` retries.

    Celery then acknowledges the message (it is not requeued), so nothing would run the run again:
    fail it now when its attempts are used up (else :func:`requeue_stuck` re-queues it later).
    """
    if getattr(sender, "name", None) != run_robot.name or not isinstance(exception, WorkerLostError) or not args:
        return
    if not connection.in_atomic_block:  # the main process runs no tasks: its connection may be stale
        close_old_connections()
    row = app_settings.result_model().objects.filter(pk=args[0]).first()
    if row is not None and not fail_exhausted(row):
        logger.warning("robotlab: run %s lost its worker after %s attempts; robotlab_requeue_stuck will re-queue it",
                       row.pk, row.attempts)


def _send(result_id: Any, task_id: str, queue: str) -> None:
    run_robot.apply_async(args=(result_id,), task_id=task_id, queue=queue)


def enqueue(result: Any, *, queue: str | None = None) -> str:
    """Send ``result`` (a row or its primary key) to :func:`run_robot` once the transaction commits.

    The row's ``task_id`` is set now. ``queue`` defaults to ``ROBOTLAB["TASK_QUEUE"]`` (``"default"``:
    start workers with ``-Q default`` or set ``CELERY_TASK_DEFAULT_QUEUE = "default"``).

    Returns:
        The Celery task id.
    """
    pk = getattr(result, "pk", result)
    task_id = uuid.uuid4().hex
    app_settings.result_model().objects.filter(pk=pk).update(task_id=task_id)
    if hasattr(result, "task_id"):
        result.task_id = task_id
    chosen = queue or str(app_settings.TASK_QUEUE)
    transaction.on_commit(lambda: _send(pk, task_id, chosen), robust=True)
    return task_id


def requeue_stuck(*, lease: float | None = None, dry_run: bool = False) -> tuple[list[Any], list[Any]]:
    """Re-queue or fail the runs whose worker looks lost.

    A run is stuck when it has been ``running`` for more than ``lease`` seconds (default
    ``ROBOTLAB["RUN_LEASE"]``), or ``queued``/``retrying`` untouched that long (its enqueue was lost:
    the broker was down at commit). A stuck run with attempts left is set ``retrying`` and
    dispatched through ``ROBOTLAB["EXECUTOR"]``; one without is marked failed.

    Returns:
        The primary keys re-queued and the primary keys failed.
    """
    from . import executor

    model = app_settings.result_model()
    cutoff = timezone.now() - timedelta(seconds=float(app_settings.RUN_LEASE if lease is None else lease))
    stuck = model.objects.filter(Q(status=Status.RUNNING, started_at__lt=cutoff)
                                 | Q(status__in=_WAITING, updated_at__lt=cutoff)).order_by("pk")
    requeued: list[Any] = []
    failed: list[Any] = []
    with transaction.atomic():
        for row in stuck.select_for_update(skip_locked=True):
            if row.attempts >= app_settings.TASK_MAX_ATTEMPTS:
                failed.append(row.pk)
                if not dry_run:
                    fail_exhausted(row)
                continue
            if dry_run or model.objects.filter(pk=row.pk, status=row.status).update(
                    status=Status.RETRYING, updated_at=timezone.now()):
                requeued.append(row.pk)
    if not dry_run:
        for pk in requeued:
            executor.dispatch(pk)
    return requeued, failed
