"""Who runs a queued row, and how often: the claim, the lease and the attempt limit.

Any number of workers may be handed the same row (a redelivered task message, a re-queue); this
module's conditional updates make exactly one of them execute it:

* :func:`claim` moves a waiting row (``queued``/``retrying``) to ``running`` with one conditional
  ``UPDATE`` that also counts the attempt; a second worker's claim updates nothing and does nothing.
* :func:`admit` decides what a delivery of a row may do. A *retry* or a *redelivery* (the broker sent
  the message again) takes a row left ``running`` over (:func:`take_over`, back to ``retrying``) and
  executes it again only when the execution that claimed it is known to be over: the row's lease ran
  out (``running`` for longer than ``ROBOTLAB["RUN_LEASE"]``), or :func:`claimant_gone` (the claim
  names a process on this worker host that is gone, or this process, which no longer executes it). A
  retry's number alone proves nothing: a message can be duplicated while the run it retries executes
  elsewhere, and must not run it twice. Any other delivery of a ``running`` or finished row is a
  duplicate.
* :func:`release_ended` is what the worker does when it sends a retry (its pool child died, or the
  task raised): the row is set ``retrying`` at once when its claimant is gone, so the retry claims it.
* :func:`fail_exhausted` marks a row that used up ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` failed
  (``AttemptsExhausted``, with ``run.failed`` and ``stream.ended`` sent) instead of running it again.
* :func:`release_stuck` finds the rows whose worker looks lost (``running`` past the lease, or waiting
  untouched that long: a lost enqueue) and sets them ``retrying``, or fails those out of attempts;
  :func:`robotlab_django.runs.executor.requeue_stuck` dispatches them again.

Nothing here dispatches or executes: :mod:`robotlab_django.runs.runner` executes a claimed row and
:mod:`robotlab_django.runs.executor` dispatches.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.conf import app_settings
from robotlab_django.runs.records import current_worker
from robotlab_django.streaming.event_stream import publish_failure

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["WAITING", "admit", "claim", "claimant_gone", "executing", "fail_exhausted", "lease_expired",
           "release_ended", "release_stuck", "take_over"]

logger = logging.getLogger("robotlab_django")

#: The statuses of a row waiting to be claimed.
WAITING = (Status.QUEUED, Status.RETRYING)

#: The rows deliveries in this process are executing now, by primary key, with how many (see :func:`executing`).
_executing: Counter[Any] = Counter()


@contextlib.contextmanager
def executing(pk: int) -> Iterator[None]:
    """Mark the row ``pk`` as executed by this process while the block runs (for :func:`claimant_gone`)."""
    _executing[pk] += 1
    try:
        yield
    finally:
        _executing[pk] -= 1
        if not _executing[pk]:
            del _executing[pk]


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # it exists, under another user
        return False
    return False


def claimant_gone(row: RobotResult, worker: str) -> bool:
    """Whether the execution that claimed the ``running`` ``row`` is provably over.

    It is when the claim (the row's ``worker`` and ``worker_pid``) names the host ``worker`` (a Celery
    node's hostname) and either a process that no longer exists (a pool child that died) or this process,
    which is not executing the row now (the attempt raised and returned). A claim made on another host, or
    by a live process, may still be executing: only the lease (:func:`lease_expired`) ends it.
    """
    if not row.worker or row.worker != worker or row.worker_pid is None:
        return False
    if row.worker_pid == os.getpid():
        return row.pk not in _executing
    return _process_gone(int(row.worker_pid))


def claim(row: RobotResult, **fields: object) -> bool:
    """Mark the waiting ``row`` running and count the attempt; ``False`` when another worker already took it.

    ``fields`` (such as the ``worker`` that claims it) are set by the same update.
    """
    now = timezone.now()
    claimed = type(row).objects.filter(pk=row.pk, status__in=WAITING).update(
        status=Status.RUNNING, attempts=F("attempts") + 1, started_at=now, updated_at=now, **fields)
    if not claimed:
        row.refresh_from_db()
        return False
    row.status, row.started_at, row.attempts = Status.RUNNING, now, row.attempts + 1
    for name, value in fields.items():
        setattr(row, name, value)
    return True


def fail_exhausted(row: RobotResult) -> bool:
    """Mark a waiting ``row`` failed when it used up ``TASK_MAX_ATTEMPTS``; ``True`` when it did."""
    limit = app_settings.TASK_MAX_ATTEMPTS
    if row.attempts < limit:
        return False
    now = timezone.now()
    fields: dict[str, Any] = {"status": Status.FAILED, "error_type": "AttemptsExhausted", "finished_at": now,
              "updated_at": now,
              "error": f"Gave up after {row.attempts} attempts (ROBOTLAB['TASK_MAX_ATTEMPTS'] is {limit}); "
                       "its worker was lost each time."}
    if type(row).objects.filter(pk=row.pk, status__in=[*WAITING, Status.RUNNING]).update(**fields):
        for name, value in fields.items():
            setattr(row, name, value)
        logger.warning("robotlab: run %s failed after %s attempts", row.pk, row.attempts)
        publish_failure(row, fields["error"], fields["error_type"])
    return True


def take_over(row: RobotResult) -> None:
    """Set a ``running`` row whose execution is known to be over back to ``retrying``."""
    if row.status == Status.RUNNING and type(row).objects.filter(
            pk=row.pk, status=Status.RUNNING, attempts=row.attempts).update(status=Status.RETRYING,
                                                                           updated_at=timezone.now()):
        row.status = Status.RETRYING
        logger.warning("robotlab: attempt %s of run %s ended unfinished; running it again", row.attempts, row.pk)


def lease_expired(row: RobotResult) -> bool:
    """Whether ``row`` started longer than ``ROBOTLAB["RUN_LEASE"]`` seconds ago."""
    cutoff = timezone.now() - timedelta(seconds=float(app_settings.RUN_LEASE))
    return row.started_at is not None and row.started_at < cutoff


def admit(result_id: int, *, retried: bool = False, redelivered: bool = False) -> tuple[RobotResult | None, bool]:
    """The row ``result_id`` and whether a delivery of it must be skipped (see the module docs).

    Args:
        result_id: The row's primary key.
        retried: The delivery is a retry (an earlier delivery's worker was lost, or it raised; a duplicated
            retry message may come while the run executes elsewhere).
        redelivered: The broker delivered the message again (it may still be executing elsewhere).

    Returns:
        ``(row, skipped)``: ``row`` is ``None`` when it is gone; ``skipped`` is true when it is gone,
        already claimed or finished (a duplicate delivery), or out of attempts (now failed).
    """
    # its turn's row and its thread come with it: a distributed task's job reads them right after (one query);
    # no ORDER BY for a primary key (not first(), and the model's ordering dropped: compiling it doubled the
    # statement's CPU, 1.4 against 0.77 ms, in every job)
    found = swappable.result_model().objects.select_related("parent", "thread").filter(pk=result_id).order_by()[:1]
    row = next(iter(found), None)
    if row is None:
        logger.warning("robotlab: run %s is gone; dropping its task", result_id)
        return None, True
    if (row.status == Status.RUNNING and (retried or redelivered)
            and (lease_expired(row) or claimant_gone(row, current_worker()[0]))):
        take_over(row)
    return row, row.status not in WAITING or fail_exhausted(row)


def release_ended(result_id: int, worker: str) -> bool:
    """Set the ``running`` row ``result_id`` back to ``retrying`` when its claimant (on host ``worker``) is gone.

    Called where the worker sends a retry of the row's task: its pool child died, or the task raised. The
    retry then claims the row at once instead of waiting for the lease. ``True`` when it was released.
    """
    row = swappable.result_model().objects.filter(pk=result_id, status=Status.RUNNING).first()
    if row is None or not claimant_gone(row, worker):
        return False
    take_over(row)
    return bool(row.status == Status.RETRYING)


def release_stuck(*, lease: float | None = None, dry_run: bool = False) -> tuple[list[Any], list[Any]]:
    """Set the runs whose worker looks lost back to ``retrying``, or fail those out of attempts.

    A run is stuck when it has been ``running`` for more than ``lease`` seconds (default
    ``ROBOTLAB["RUN_LEASE"]``), or ``queued``/``retrying`` untouched that long (its enqueue was lost:
    the broker was down at commit). Nothing is dispatched here.

    Returns:
        The primary keys released (to dispatch again) and the primary keys failed.
    """
    model = swappable.result_model()
    cutoff = timezone.now() - timedelta(seconds=float(app_settings.RUN_LEASE if lease is None else lease))
    # a network turn's row waits on its task rows: while one of them is alive (running within the lease, queued
    # recently, or waiting for an answer), the turn is not stuck, however long ago it last moved
    live_tasks = model.objects.filter(parent_id=OuterRef("pk")).filter(
        Q(status=Status.RUNNING, started_at__gte=cutoff) | Q(status__in=WAITING, updated_at__gte=cutoff)
        | Q(status=Status.AWAITING))
    stuck = (model.objects.filter(Q(status=Status.RUNNING, started_at__lt=cutoff)
                                  | Q(status__in=WAITING, updated_at__lt=cutoff))
             .exclude(Exists(live_tasks)).order_by("pk"))
    released: list[Any] = []
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
                released.append(row.pk)
    return released, failed
