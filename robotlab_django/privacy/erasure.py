"""Erasure: delete every row holding one user's content (their threads, results, events, steps and tool effects).

``manage.py robotlab_erase --user USERNAME`` and the admin's erase action call :func:`erase_user`.
A user's content is their threads (the owner link) and everything under them: the robot results
(with a network turn's task rows), the stored stream events, the checkpointed steps and the journaled tool
effects (:mod:`robotlab_django.runs.effects`: their arguments and results). Deletion
goes thread batch by thread batch, each in one transaction, leaves first (events, steps, results,
then the threads), so a large account never holds one huge transaction; a dry run only counts.

The user's runs in flight are cancelled first (:func:`cancel_in_flight`): queued, retrying, running and
awaiting runs and network turns, with their tasks. The erasure then waits (up to ``stop_timeout``
seconds) for each running one's worker to notice and stop, its ``run.cancelled`` stored, so that no
worker goes on streaming from the model, and billing it, for a run whose rows are gone, or writes events
under a deleted run (an ``IntegrityError``).

By default deleting a user only clears the owner link of their threads (``on_delete=SET_NULL``),
which leaves the content in place with no way left to find it by user. With
``ROBOTLAB["ERASE_ON_USER_DELETE"] = True`` a ``pre_delete`` receiver erases the user's content
first, in the same transaction as the deletion (read when the user is deleted; no migration).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models.signals import pre_delete
from django.utils import timezone

from robotlab.streaming import RUN_CANCELLED
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.accounting import rollups
from robotlab_django.conf import app_settings
from robotlab_django.runs import watch
from robotlab_django.runs.effects import forget_runs

if TYPE_CHECKING:
    from django.contrib.auth.models import _User
    from django.db.models import QuerySet

__all__ = ["BATCH_SIZE", "STOP_TIMEOUT", "ErasureReport", "cancel_in_flight", "connect_signals", "erase_user",
           "erasure_counts"]

logger = logging.getLogger("robotlab_django")

#: Threads deleted per transaction by default.
BATCH_SIZE = 200
#: Seconds an erasure waits by default for the user's running runs to stop after their cancel.
STOP_TIMEOUT = 30.0
#: The statuses of a run in flight, which an erasure cancels first.
IN_FLIGHT = (Status.QUEUED, Status.RETRYING, Status.RUNNING, Status.AWAITING)


@dataclass(frozen=True)
class ErasureReport:
    """What an erasure deleted (or would delete, in a dry run) for one user."""

    user: str
    threads: int
    results: int
    events: int
    steps: int
    dry_run: bool = False
    cancelled: int = 0

    @property
    def total(self) -> int:
        """All rows counted."""
        return self.threads + self.results + self.events + self.steps

    def describe(self) -> str:
        """Say what was erased in one line, such as ``Erased 2 thread(s), 5 result(s) ... of user 'ada'.``."""
        verb = "Would erase" if self.dry_run else "Erased"
        if self.cancelled:
            verb = (f"Would cancel {self.cancelled} run(s) in flight, then erase" if self.dry_run
                    else f"Cancelled {self.cancelled} run(s) in flight, then erased")
        return (f"{verb} {self.threads} thread(s), {self.results} result(s), {self.events} event(s) and "
                f"{self.steps} step(s) of user '{self.user}'.")


def _querysets(thread_ids: Iterable[int] | QuerySet[Any, Any]) -> tuple[Any, Any, Any, Any]:
    """(threads, results, events, steps) under the threads ``thread_ids`` (a list or a subquery)."""
    threads = swappable.thread_model().objects.filter(pk__in=thread_ids)
    results = swappable.result_model().objects.filter(thread_id__in=thread_ids)
    events = swappable.event_model().objects.filter(thread_id__in=thread_ids)
    steps = swappable.step_model().objects.filter(result__thread_id__in=thread_ids)
    return threads, results, events, steps


def _owned(user: _User) -> Any:
    """The primary keys of the threads ``user`` owns, as a subquery."""
    return swappable.thread_model().objects.filter(user_id=user.pk).values("pk")


def _name(user: _User) -> str:
    return str(user.get_username() if hasattr(user, "get_username") else user.pk)


def erasure_counts(user: _User) -> ErasureReport:
    """How many rows of each kind hold ``user``'s content (what :func:`erase_user` would delete)."""
    threads, results, events, steps = _querysets(_owned(user))
    return ErasureReport(user=_name(user), threads=threads.count(), results=results.count(),
                         events=events.count(), steps=steps.count(), dry_run=True,
                         cancelled=results.filter(status__in=IN_FLIGHT).count())


def cancel_in_flight(user: _User) -> tuple[int, list[int]]:
    """Cancel every run of ``user``'s threads that is in flight (turns with their tasks), without events.

    The rows become ``cancelled`` in one update; a running run's worker notices at its next check
    (:func:`robotlab_django.runs.watch.watch`, at once in this process), stops, and stores its own
    ``run.cancelled``. Nothing else is sent: the rows are about to go.

    Returns:
        How many rows were cancelled, and the primary keys of those whose own worker was running them
        (runs and task rows; not a network turn's row, which no worker runs while its tasks do).
    """
    model = swappable.result_model()
    now = timezone.now()
    with transaction.atomic():
        flight = model.objects.filter(thread_id__in=_owned(user), status__in=IN_FLIGHT).select_for_update()
        rows = list(flight.values_list("pk", "status", "parent_id"))
        turns = {parent for _pk, _status, parent in rows if parent is not None}
        running = [pk for pk, status, _parent in rows if status == Status.RUNNING and pk not in turns]
        cancelled = model.objects.filter(pk__in=[pk for pk, _status, _parent in rows], status__in=IN_FLIGHT).update(
            status=Status.CANCELLED, finished_at=now, updated_at=now)
    transaction.on_commit(lambda: watch.wake(*running))
    if cancelled:
        logger.warning("robotlab: erasing user %s: cancelled %s run(s) in flight", user.pk, cancelled)
    return cancelled, running


def _wait_stopped(running: list[int], timeout: float) -> list[int]:
    """Wait until the workers of the ``running`` rows stored their ``run.cancelled``; the rows still going."""
    events = swappable.event_model().objects
    deadline = time.monotonic() + timeout
    left = list(running)
    while left:
        stopped = set(events.filter(result_id__in=left, kind=RUN_CANCELLED).values_list("result_id", flat=True))
        left = [pk for pk in left if pk not in stopped]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(min(0.1, max(deadline - time.monotonic(), 0)))
    return left


def erase_user(user: _User, *, dry_run: bool = False, batch_size: int = BATCH_SIZE,
               stop_timeout: float = STOP_TIMEOUT) -> ErasureReport:
    """Cancel ``user``'s runs in flight, then delete every thread they own with its results, events and steps.

    The user row stays. The usage rollups keep the user's runs, tokens and cost, folded into the anonymous ones.

    Args:
        user: The user (any object with ``pk``) whose content goes.
        dry_run: Count what would be cancelled and deleted; change nothing.
        batch_size: Threads (with everything under them) deleted per transaction.
        stop_timeout: Seconds to wait for the running runs' workers to stop (each stores its
            ``run.cancelled``) before deleting; a worker that does not answer in time was most likely lost.
            Inside a transaction (the user's own deletion) nothing waits: the cancel is not visible yet.

    Raises:
        ValueError: ``batch_size`` below 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    counted = erasure_counts(user)
    if dry_run:
        return counted
    cancelled, running = cancel_in_flight(user)
    if running and not connection.in_atomic_block:
        left = _wait_stopped(running, stop_timeout)
        if left:
            logger.warning("robotlab: erasing user %s: runs %s did not stop within %s s; erasing anyway", user.pk,
                           left, stop_timeout)
    deleted: dict[str, int] = {}
    thread_model = swappable.thread_model()
    while True:
        batch = list(thread_model.objects.filter(user_id=user.pk).order_by("pk").values_list("pk", flat=True)
                     [:batch_size])
        if not batch:
            break
        with transaction.atomic():
            forget_runs(swappable.result_model().objects.filter(thread_id__in=batch).values_list("pk", flat=True))
            # leaves first, so each delete is a plain DELETE rather than a cascade Django collects in memory
            swappable.span_model().objects.filter(result__thread_id__in=batch).delete()  # the runs' spans
            for queryset in _querysets(batch)[::-1]:
                for label, count in queryset.delete()[1].items():
                    deleted[label] = deleted.get(label, 0) + count
    rollups.forget_user(user.pk)  # their usage stays in the totals, without their id
    labels = [model._meta.label for model in (thread_model, swappable.result_model(),
                                              swappable.event_model(), swappable.step_model())]
    threads, results, events, steps = (deleted.get(label, 0) for label in labels)
    return ErasureReport(user=counted.user, threads=threads, results=results, events=events, steps=steps,
                         cancelled=cancelled)


def _erase_on_delete(sender: object, instance: _User, **kwargs: object) -> None:
    """``pre_delete`` of the user model: erase the user's content when ``ERASE_ON_USER_DELETE`` is on."""
    if app_settings.ERASE_ON_USER_DELETE:
        erase_user(instance)


def connect_signals() -> None:
    """Connect the ``pre_delete`` receiver of the user model (it reads the setting at delete time)."""
    pre_delete.connect(_erase_on_delete, sender=get_user_model(), dispatch_uid="robotlab_erase_on_user_delete")
