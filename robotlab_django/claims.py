"""Who runs a queued row, and how often: the claim, the lease and the attempt limit.

Any number of workers may be handed the same row (a redelivered task message, a re-queue); this
module's conditional updates make exactly one of them execute it:

* :func:`claim` moves a waiting row (``queued``/``retrying``) to ``running`` with one conditional
  ``UPDATE`` that also counts the attempt; a second worker's claim updates nothing and does nothing.
* :func:`admit` decides what a delivery of a row may do. A *retry* knows the earlier execution is
  over (its worker was lost, or it raised), so a row it left ``running`` is taken over
  (:func:`take_over`, back to ``retrying``) and executed again. A *redelivery* (the broker sent the
  message again after its ``visibility_timeout``) takes over a row ``running`` for longer than
  ``ROBOTLAB["RUN_LEASE"]`` only: a message redelivered while its run may still be executing elsewhere
  must not run it twice. Any other delivery of a ``running`` or finished row is a duplicate.
* :func:`fail_exhausted` marks a row that used up ``ROBOTLAB["TASK_MAX_ATTEMPTS"]`` failed
  (``AttemptsExhausted``, with ``run.failed`` and ``stream.ended`` sent) instead of running it again.
* :func:`release_stuck` finds the rows whose worker looks lost (``running`` past the lease, or waiting
  untouched that long: a lost enqueue) and sets them ``retrying``, or fails those out of attempts;
  :func:`robotlab_django.executor.requeue_stuck` dispatches them again.

Nothing here dispatches or executes: :mod:`robotlab_django.runner` executes a claimed row and
:mod:`robotlab_django.executor` dispatches.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from . import swappable
from .abstract_models import Status
from .conf import app_settings
from .event_stream import publish_failure

__all__ = ["WAITING", "admit", "claim", "fail_exhausted", "lease_expired", "release_stuck", "take_over"]

logger = logging.getLogger("robotlab_django")

#: The statuses of a row waiting to be claimed.
WAITING = (Status.QUEUED, Status.RETRYING)


def claim(row: Any, **fields: Any) -> bool:
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


def fail_exhausted(row: Any) -> bool:
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


def take_over(row: Any) -> None:
    """Set a ``running`` row whose execution is known to be over back to ``retrying``."""
    if row.status == Status.RUNNING and type(row).objects.filter(
            pk=row.pk, status=Status.RUNNING, attempts=row.attempts).update(status=Status.RETRYING,
                                                                           updated_at=timezone.now()):
        row.status = Status.RETRYING
        logger.warning("robotlab: attempt %s of run %s ended unfinished; running it again", row.attempts, row.pk)


def lease_expired(row: Any) -> bool:
    """Whether ``row`` started longer than ``ROBOTLAB["RUN_LEASE"]`` seconds ago."""
    cutoff = timezone.now() - timedelta(seconds=float(app_settings.RUN_LEASE))
    return row.started_at is not None and row.started_at < cutoff


def admit(result_id: Any, *, retried: bool = False, redelivered: bool = False) -> tuple[Any, bool]:
    """The row ``result_id`` and whether a delivery of it must be skipped (see the module docs).

    Args:
        result_id: The row's primary key.
        retried: The delivery is a retry: the earlier execution of this run is over.
        redelivered: The broker delivered the message again (it may still be executing elsewhere).

    Returns:
        ``(row, skipped)``: ``row`` is ``None`` when it is gone; ``skipped`` is true when it is gone,
        already claimed or finished (a duplicate delivery), or out of attempts (now failed).
    """
    row = swappable.result_model().objects.filter(pk=result_id).first()
    if row is None:
        logger.warning("robotlab: run %s is gone; dropping its task", result_id)
        return None, True
    if (retried and not redelivered) or (redelivered and lease_expired(row)):
        take_over(row)
    return row, row.status not in WAITING or fail_exhausted(row)


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
