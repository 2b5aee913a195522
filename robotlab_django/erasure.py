"""Erasure: delete every row holding one user's content (their threads, results, events and steps).

``manage.py robotlab_erase --user USERNAME`` and the admin's erase action call :func:`erase_user`.
A user's content is their threads (the owner link) and everything under them: the robot results
(with a network turn's task rows), the stored stream events and the checkpointed steps. Deletion
goes thread batch by thread batch, each in one transaction, leaves first (events, steps, results,
then the threads), so a large account never holds one huge transaction; a dry run only counts.

By default deleting a user only clears the owner link of their threads (``on_delete=SET_NULL``),
which leaves the content in place with no way left to find it by user. With
``ROBOTLAB["ERASE_ON_USER_DELETE"] = True`` a ``pre_delete`` receiver erases the user's content
first, in the same transaction as the deletion (read when the user is deleted; no migration).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import pre_delete

from . import rollups, swappable
from .conf import app_settings

__all__ = ["ErasureReport", "connect_signals", "erase_user", "erasure_counts"]

#: Threads deleted per transaction by default.
BATCH_SIZE = 200


@dataclass(frozen=True)
class ErasureReport:
    """What an erasure deleted (or would delete, in a dry run) for one user."""

    user: str
    threads: int
    results: int
    events: int
    steps: int
    dry_run: bool = False

    @property
    def total(self) -> int:
        """All rows counted."""
        return self.threads + self.results + self.events + self.steps

    def describe(self) -> str:
        """Say what was erased in one line, such as ``Erased 2 thread(s), 5 result(s) ... of user 'ada'.``."""
        verb = "Would erase" if self.dry_run else "Erased"
        return (f"{verb} {self.threads} thread(s), {self.results} result(s), {self.events} event(s) and "
                f"{self.steps} step(s) of user '{self.user}'.")


def _querysets(thread_ids: Any) -> tuple[Any, Any, Any, Any]:
    """(threads, results, events, steps) under the threads ``thread_ids`` (a list or a subquery)."""
    threads = swappable.thread_model().objects.filter(pk__in=thread_ids)
    results = swappable.result_model().objects.filter(thread_id__in=thread_ids)
    events = swappable.event_model().objects.filter(thread_id__in=thread_ids)
    steps = swappable.step_model().objects.filter(result__thread_id__in=thread_ids)
    return threads, results, events, steps


def _owned(user: Any) -> Any:
    """The primary keys of the threads ``user`` owns, as a subquery."""
    return swappable.thread_model().objects.filter(user_id=user.pk).values("pk")


def _name(user: Any) -> str:
    return str(user.get_username() if hasattr(user, "get_username") else user.pk)


def erasure_counts(user: Any) -> ErasureReport:
    """How many rows of each kind hold ``user``'s content (what :func:`erase_user` would delete)."""
    threads, results, events, steps = _querysets(_owned(user))
    return ErasureReport(user=_name(user), threads=threads.count(), results=results.count(),
                         events=events.count(), steps=steps.count(), dry_run=True)


def erase_user(user: Any, *, dry_run: bool = False, batch_size: int = BATCH_SIZE) -> ErasureReport:
    """Delete every thread ``user`` owns with its results, events and steps; the user row stays.

    The usage rollups keep the user's runs, tokens and cost, folded into the anonymous ones.

    Args:
        user: The user (any object with ``pk``) whose content goes.
        dry_run: Count what would be deleted; delete nothing.
        batch_size: Threads (with everything under them) deleted per transaction.

    Raises:
        ValueError: ``batch_size`` below 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    counted = erasure_counts(user)
    if dry_run:
        return counted
    deleted: dict[str, int] = {}
    thread_model = swappable.thread_model()
    while True:
        batch = list(thread_model.objects.filter(user_id=user.pk).order_by("pk").values_list("pk", flat=True)
                     [:batch_size])
        if not batch:
            break
        with transaction.atomic():
            # leaves first, so each delete is a plain DELETE rather than a cascade Django collects in memory
            for queryset in _querysets(batch)[::-1]:
                for label, count in queryset.delete()[1].items():
                    deleted[label] = deleted.get(label, 0) + count
    rollups.forget_user(user.pk)  # their usage stays in the totals, without their id
    labels = [model._meta.label for model in (thread_model, swappable.result_model(),
                                              swappable.event_model(), swappable.step_model())]
    threads, results, events, steps = (deleted.get(label, 0) for label in labels)
    return ErasureReport(user=counted.user, threads=threads, results=results, events=events, steps=steps)


def _erase_on_delete(sender: Any, instance: Any, **kwargs: Any) -> None:
    """``pre_delete`` of the user model: erase the user's content when ``ERASE_ON_USER_DELETE`` is on."""
    if app_settings.ERASE_ON_USER_DELETE:
        erase_user(instance)


def connect_signals() -> None:
    """Connect the ``pre_delete`` receiver of the user model (it reads the setting at delete time)."""
    pre_delete.connect(_erase_on_delete, sender=get_user_model(), dispatch_uid="robotlab_erase_on_user_delete")
