"""One reply at a time per thread: which run a thread is busy with, which run waits behind it, and the policy.

A thread's *reply* is a top-level run (not a network's task row, not a robot a network delegated to). The thread is
busy while one of its replies is ``queued``, ``running`` or ``retrying`` (:data:`ACTIVE`); a run parked on a question
(``awaiting``) does not keep it busy. A run queued while an earlier reply of its thread is active, or is an
interrupted reply whose runner has not stopped yet (cancelled with ``stop_reason`` ``"interrupted"`` and no
``stream.ended`` stored, for at most :data:`STOP_GRACE` seconds), is *held* (:func:`held`):
:func:`robotlab_django.runs.executor.dispatch` does not hand it to the executor, and once the reply before it ends
(its runner returns, it is cancelled), :func:`release` asks the executor to dispatch the thread's next waiting run
(:func:`next_waiting`), through the :data:`reply_ended` signal. A dispatch that comes anyway (a
re-queue of a stuck run) is held again, and a duplicate one does nothing (:mod:`robotlab_django.runs.claims`).

What a message does while its thread is busy is the robot's (or network's) :func:`on_busy` policy; the doors apply
it (:mod:`robotlab_django.runs.busy`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.dispatch import Signal
from django.utils import timezone

from robotlab.streaming import STREAM_ENDED
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.conf import app_settings
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.registry.entries import on_busy_policy
from robotlab_django.runs.history import INTERRUPTED

__all__ = ["ACTIVE", "DEFAULT_POLICY", "STOP_GRACE", "WAITING", "active_replies", "held", "next_waiting", "on_busy",
           "release", "reply_ended"]

#: The statuses of a reply that keeps its thread busy.
ACTIVE = (Status.QUEUED, Status.RUNNING, Status.RETRYING)
#: The statuses of a run waiting for a worker.
WAITING = (Status.QUEUED, Status.RETRYING)
#: The policy of a robot that sets none.
DEFAULT_POLICY = "enqueue"
#: Seconds the reply after an interrupted one waits at most for its runner to stop (a lost worker never does).
STOP_GRACE = 30.0

#: Sent with ``thread_id`` when a reply of that thread ended (or parked): the executor dispatches the next one.
reply_ended = Signal()


def on_busy(name: str) -> str:
    """The on-busy policy of the robot or network ``name``.

    ``ROBOTLAB["ROBOTS"][name]["on_busy"]`` (``["NETWORKS"]`` for a network), else its registration's
    ``on_busy``, else :data:`DEFAULT_POLICY`. A network's ``"steer"`` is ``"enqueue"``: a network turn has no one
    conversation to add a message to.

    Raises:
        ValueError: the setting names no policy (``manage.py check`` reports it too).
    """
    policy = on_busy_policy(app_settings.robot_option(name, "on_busy"))
    if policy is None:
        try:
            policy = registry.lookup(name).on_busy
        except UnknownRobotError:
            policy = None
    policy = policy or DEFAULT_POLICY
    if policy == "steer" and registry.is_network(name):
        return DEFAULT_POLICY
    return policy


def _replies() -> QuerySet[Any]:
    return swappable.result_model().objects.filter(parent__isnull=True, delegated_by="")


def active_replies(thread_id: Any) -> QuerySet[Any]:
    """The thread's replies that keep it busy (:data:`ACTIVE`), oldest first."""
    return _replies().filter(thread_id=thread_id, status__in=ACTIVE).order_by("sequence_number")


def held(pk: Any) -> bool:
    """Whether the run ``pk`` is a waiting reply behind an active or a stopping one of its thread (one query)."""
    stopped = swappable.event_model().objects.filter(result_id=OuterRef("pk"), kind=STREAM_ENDED)
    stopping = (Q(status=Status.CANCELLED, stop_reason=INTERRUPTED,
                  finished_at__gte=timezone.now() - timedelta(seconds=STOP_GRACE)) & ~Exists(stopped))
    earlier = _replies().filter(Q(status__in=ACTIVE) | stopping, thread_id=OuterRef("thread_id"),
                                sequence_number__lt=OuterRef("sequence_number"))
    return bool(_replies().filter(pk=pk, status__in=WAITING).filter(Exists(earlier)).exists())


def next_waiting(thread_id: Any) -> Any:
    """The primary key of the thread's oldest active reply when it waits for a worker; ``None`` otherwise.

    Nothing before it is active, so it may run now.
    """
    first = active_replies(thread_id).values_list("pk", "status").first()
    return first[0] if first is not None and first[1] in WAITING else None


def release(thread_id: Any) -> None:
    """A reply of the thread ended: send :data:`reply_ended` (the executor dispatches the next waiting run)."""
    reply_ended.send(sender=release, thread_id=thread_id)
