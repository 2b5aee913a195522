"""A per-user limit on the runs a user queues through the doors: the chat socket and form, ACP and A2A.

A run costs money, and a door queues one per request: a client that sends 100 ``message`` frames on one
socket queued 100 runs in 11 seconds. So each door asks :func:`admit` before it queues a run: a user may
queue at most ``ROBOTLAB["RUN_RATE_LIMIT"]`` runs (30 by default) in any ``ROBOTLAB["RUN_RATE_PERIOD"]``
seconds (60), on all their threads together; one more raises :class:`RateLimitedError`, which each door
answers in its own protocol's form, queuing nothing:

* the thread websocket: ``{"type": "error", "error": "...", "retry_after": <seconds>}``, the socket stays open;
* the chat page's form: HTTP 429 with ``Retry-After`` (JSON ``{"error", "retry_after"}`` for ``fetch``);
* ACP ``POST /runs``: HTTP 429 with ``Retry-After`` and ``{"code": "invalid_input", "message"}``;
* A2A ``SendMessage``/``message/send`` (and the streaming forms): the JSON-RPC error ``-32429``, its ``data``
  holding ``retry_after``.

The count is of the runs themselves: the top-level result rows created on the user's threads in the last
period, whatever queued them (a door, a job, the admin's re-run), so it holds across web processes and
hosts with no shared cache, and a refused request adds nothing to it. :func:`admit` runs in the
transaction that inserts the run, with the user's row locked (``select_for_update``), so concurrent
requests of one user are counted one after the other and never pass the limit together. An anonymous
visitor (``ROBOTLAB_CHAT_LOGIN_REQUIRED = False``) is counted per thread: it can open more threads, so a
public chat needs a limit in front of it too (a proxy's, per address). Answering a parked run's question
and cancelling queue no new run and are not limited.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.utils import timezone

from robotlab_django import swappable
from robotlab_django.conf import app_settings

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab_django.models import Thread

__all__ = ["RateLimitedError", "admit"]


class RateLimitedError(Exception):
    """The user has queued as many runs as the rate limit allows; ``retry_after`` seconds until one more fits."""

    def __init__(self, limit: int, period: float, retry_after: int) -> None:
        """The limit that refused the run, and the whole seconds until the oldest counted run leaves the window."""
        self.limit, self.period, self.retry_after = limit, period, retry_after
        super().__init__(f"Too many runs: at most {limit} every {period:g} seconds; try again in {retry_after} "
                         f"second{'s' if retry_after != 1 else ''}.")


def admit(thread: Thread, user: _AnyUser | None) -> None:
    """Refuse one more run of ``user`` (an anonymous visitor: on ``thread``) past the rate limit.

    Call it inside the transaction that inserts the run: it locks the user's row (the thread's for a
    visitor) until that transaction ends.

    Raises:
        RateLimitedError: the user queued ``RUN_RATE_LIMIT`` runs in the last ``RUN_RATE_PERIOD`` seconds.
    """
    limit, period = app_settings.RUN_RATE_LIMIT, app_settings.RUN_RATE_PERIOD
    if limit is None:
        return
    now = timezone.now()
    runs = swappable.result_model().objects.filter(parent__isnull=True, delegated_by="",
                                                   created_at__gt=now - timedelta(seconds=period))
    if user is not None and user.is_authenticated:
        list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk", flat=True))
        runs = runs.filter(thread__user_id=user.pk)
    else:
        list(type(thread).objects.select_for_update().filter(pk=thread.pk).values_list("pk", flat=True))
        runs = runs.filter(thread_id=thread.pk)
    recent = list(runs.order_by("-created_at").values_list("created_at", flat=True)[:limit])
    if len(recent) >= limit:  # one more fits once the limit-th newest leaves the window
        wait = (recent[-1] + timedelta(seconds=period) - now).total_seconds()
        raise RateLimitedError(limit, period, max(1, math.ceil(wait)))
