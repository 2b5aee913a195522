"""Retention: delete threads inactive for longer than an age, with their results, events, steps and tool effects.

``manage.py robotlab_prune --older-than 90d`` calls :func:`prune_threads`. A thread's age is
measured from its ``updated_at``, which every run touches, so an old conversation still in use
is kept. Deletion goes in batches so a large backlog never holds one huge transaction.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from robotlab_django import swappable
from robotlab_django.runs.effects import forget_runs

__all__ = ["PruneReport", "parse_age", "prune_threads"]

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks", "": "days"}


def parse_age(text: str) -> dt.timedelta:
    """``"90d"``, ``"12h"``, ``"30m"``, ``"2w"``, ``"45s"`` or a bare number of days, as a timedelta.

    Raises:
        ValueError: any other text, or an age of zero.
    """
    match = _AGE.match(str(text))
    if not match:
        raise ValueError(f"'{text}' is not an age: write a number with s, m, h, d or w (for example 90d or 12h).")
    amount, unit = int(match.group(1)), match.group(2).lower()
    if amount <= 0:
        raise ValueError(f"The age must be greater than zero, got '{text}'.")
    return dt.timedelta(**{_UNITS[unit]: amount})


@dataclass(frozen=True)
class PruneReport:
    """What a prune deleted (or would delete, in a dry run)."""

    cutoff: dt.datetime
    threads: int
    results: int
    events: int
    dry_run: bool = False


def prune_threads(older_than: dt.timedelta, *, now: dt.datetime | None = None, dry_run: bool = False,
                  batch_size: int = 500) -> PruneReport:
    """Delete every thread not updated within ``older_than``, with its results and events.

    The results' checkpointed steps go with them (a cascade), and so do their journaled tool effects.

    Args:
        older_than: The age beyond which threads go.
        now: The reference time (now by default).
        dry_run: Count without deleting.
        batch_size: Threads deleted per transaction.
    """
    if older_than <= dt.timedelta(0):
        raise ValueError("older_than must be a positive duration.")
    cutoff = (now or timezone.now()) - older_than
    threads = swappable.thread_model().objects.filter(updated_at__lt=cutoff)
    results = swappable.result_model().objects.filter(thread__in=threads)
    events = swappable.event_model().objects.filter(thread__in=threads)
    counts = (threads.count(), results.count(), events.count())
    if not dry_run:
        while True:
            batch = list(threads.order_by("pk").values_list("pk", flat=True)[:batch_size])
            if not batch:
                break
            with transaction.atomic():
                forget_runs(swappable.result_model().objects.filter(thread_id__in=batch).values_list("pk", flat=True))
                swappable.thread_model().objects.filter(pk__in=batch).delete()
    return PruneReport(cutoff=cutoff, threads=counts[0], results=counts[1], events=counts[2], dry_run=dry_run)
