"""The next task of a distributed turn, run by the job that made it ready instead of sent through the broker.

A job of a distributed turn (:mod:`robotlab_django.networks.distributed`) that advances the turn so that exactly
one task is ready runs that task itself: the turn's job its first task (a single root, or the task the router
names first), the job whose task completed the last dependency of a join the joining task, a task's job the next
link of a chain. Each saves a hop through the broker and a job's start (about 15 to 35 ms of wall on a loaded
worker). Parallel tasks are still sent, one message each, so they run at once on whichever workers are free.

Nothing else changes: the task gets its ``queued`` row in the advance's transaction, as a sent task does, and the
job claims it with the same conditional update (:func:`robotlab_django.runs.claims.claim`), so it runs once
whoever else is handed it. The claim also sets the row's ``task_id`` to the job's own (its Celery message's id):
the row is that message's work now. When the job's worker dies (or the job raises) while it runs the task,
the message's retry or redelivery takes the row over like its own (:func:`rows_of_message`, called by
:func:`robotlab_django.runs.runner.deliver`), and the worker releases it as it sends the retry
(:func:`release_rows_of_message`); ``robotlab_requeue_stuck`` remains the last resort, as for any row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.runs import claims
from robotlab_django.runs.records import current_worker

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult
    from robotlab_django.runs.deps import RunDeps

__all__ = ["Successor", "claim", "release_rows_of_message", "rows_of_message"]

#: The statuses of a row whose work is not over: the message that ran it still owns it.
_UNFINISHED = (Status.QUEUED, Status.RETRYING, Status.RUNNING)


@dataclass
class Successor:
    """What an advance leaves for its job: the one task it started, to run in the same job.

    Attributes:
        task_id: The job's Celery task id (its row's ``task_id``; ``""`` without Celery).
        row: The task row the advance queued, when it started exactly one task; ``None`` otherwise.
        turn: The turn's row as that advance stored it (its state says the task is running).
        deps: The ``RunDeps`` the job's tasks act with, once a task of the job has read them.
        finished: An advance of the job ended the turn.
    """

    task_id: str = ""
    row: RobotResult | None = None
    turn: RobotResult | None = None
    deps: RunDeps | None = None
    finished: bool = False

    def claim(self) -> dict[str, Any]:
        """The columns of the task row an advance queues for this job to run: claimed already (sync code).

        As :func:`claim` would claim it, in the transaction that creates it: ``running``, its first attempt, this
        job's worker, and the job's ``task_id``.
        """
        worker, pid = current_worker()
        fields: dict[str, Any] = {"status": Status.RUNNING, "attempts": 1, "started_at": timezone.now(),
                                  "worker": worker, "worker_pid": pid}
        if self.task_id:
            fields["task_id"] = self.task_id
        return fields

    def take(self) -> tuple[RobotResult, RobotResult] | None:
        """``(task row, turn row)`` of the task left to run, once; ``None`` when there is none."""
        if self.row is None or self.turn is None:
            return None
        taken = (self.row, self.turn)
        self.row = self.turn = None
        return taken


def claim(row: RobotResult, task_id: str) -> bool:
    """Claim the queued task ``row`` for this job (sync code: the job's thread); ``False`` when another worker has it.

    The claim's update also sets the row's ``task_id`` to the job's (when it has one), so the job's message owns it.
    """
    worker, pid = current_worker()
    fields: dict[str, Any] = {"worker": worker, "worker_pid": pid}
    if task_id:
        fields["task_id"] = task_id
    return claims.claim(row, **fields)


def rows_of_message(row: RobotResult) -> list[Any]:
    """The unfinished task rows that the message of ``row`` ran besides ``row`` (primary keys, in order).

    They are the rows its job claimed to run itself; a retry or redelivery of that message delivers them again.
    """
    if not row.task_id or (row.parent_id is None and not row.turn_state):
        return []
    turn = row.parent_id if row.parent_id is not None else row.pk
    return list(type(row).objects.filter(parent_id=turn, task_id=row.task_id, status__in=_UNFINISHED)
                .exclude(pk=row.pk).order_by("pk").values_list("pk", flat=True))


def release_rows_of_message(task_id: str, worker: str) -> list[Any]:
    """Release the running rows that the job with ``task_id`` ran besides its own, when their claimant is gone.

    Called where the worker sends the job's retry (its pool child died, or the job raised), as
    :func:`robotlab_django.runs.claims.release_ended` is for the job's own row.

    Returns:
        The primary keys released (set ``retrying``).
    """
    if not task_id:
        return []
    model = swappable.result_model()
    released = []
    for pk in model.objects.filter(task_id=task_id, status=Status.RUNNING, parent__isnull=False).order_by("pk") \
            .values_list("pk", flat=True):
        if claims.release_ended(pk, worker):
            released.append(pk)
    return released
