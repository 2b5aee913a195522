"""Stopping the other tasks of a distributed network turn that ended: a failed turn stops its running siblings.

A distributed turn (:mod:`robotlab_django.networks.distributed`) runs each task as a job of its own, on whichever
worker is free, so when one task fails the turn, its siblings may still be queued, parked, or running on other
workers. Without a stop they would go on calling the model for a turn that has already failed. When the turn
ends failed:

* its idle task rows (``queued``, ``retrying``, ``awaiting``) are cancelled at once (:func:`cancel_idle`): they
  never ran, or wait for no process; their ``run.cancelled`` goes out under the turn's ``run_id``
  (:func:`robotlab_django.streaming.event_stream.apublish_events`), so a page shows no bubble of their own;
* a running task stops before its next model call (:class:`TurnGuard`): the call in flight finishes, so what it
  paid is known, and is recorded on the task's row and in the usage rollups (the row ends ``cancelled``,
  keeping the text it streamed, like any cancelled run: :func:`robotlab_django.runs.watch.astop_cancelled`).

The guard reads the turn's status once per model call (one indexed read), on every worker, whatever ended the
turn: a failure, a cancel, or a completion that no longer needs the task. A task's first call is the exception:
its job read the turn's status as it started, a moment before.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from robotlab.errors import RobotLabError
from robotlab.llm import LLM, LLMRequest, LLMResponse, TextCallback
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.conf import app_settings
from robotlab_django.runs import watch as run_watch
from robotlab_django.runs.sync_bridge import blocking
from robotlab_django.streaming.event_stream import apublish_events

if TYPE_CHECKING:
    from robotlab.robot import Robot
    from robotlab_django.models import RobotResult

__all__ = ["IDLE", "TurnEndedError", "TurnGuard", "acancel_idle", "cancel_idle", "guard"]

#: The statuses of a task row that no process is running.
IDLE = (Status.QUEUED, Status.RETRYING, Status.AWAITING)
_FINISHED = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)


class TurnEndedError(RobotLabError, RuntimeError):
    """A task's turn ended and its run was not stopped in time by its watch (the robot fails its step)."""


def cancel_idle(turn_pk: int) -> list[RobotResult]:
    """Cancel the idle task rows of the ended turn ``turn_pk``; the rows cancelled (sync code only)."""
    model = swappable.result_model()
    now = timezone.now()
    with transaction.atomic():
        rows = list(model.objects.select_for_update().filter(parent_id=turn_pk, status__in=IDLE).order_by("pk"))
        model.objects.filter(pk__in=[row.pk for row in rows], status__in=IDLE).update(
            status=Status.CANCELLED, question={}, finished_at=now, updated_at=now)
    for row in rows:
        row.status = Status.CANCELLED
    return rows


async def acancel_idle(turn_pk: int) -> list[RobotResult]:
    """:func:`cancel_idle`, then each row's ``run.cancelled`` and ``stream.ended`` (under the turn's ``run_id``)."""
    rows = await blocking(cancel_idle, turn_pk)
    for row in rows:
        await apublish_events(row, run_watch.cancelled_events(row))
    return rows


def _turn_ended(row: RobotResult) -> bool:
    return row.parent_id is not None and type(row).objects.filter(pk=row.parent_id, status__in=_FINISHED).exists()


def _stop(row: RobotResult) -> bool:
    now = timezone.now()
    return bool(type(row).objects.filter(pk=row.pk, status=Status.RUNNING).update(
        status=Status.CANCELLED, finished_at=now, updated_at=now))


class TurnGuard:
    """An LLM that sends a task's next call only while the task's turn has not ended.

    Once the turn ended it cancels the task's row instead and wakes its watch
    (:func:`robotlab_django.runs.watch.watch`), which stops the task here, before the call is sent.

    Args:
        llm: The task robot's LLM (its budget and checkpoint wrappers included).
        row: The task's row.
        checked: The turn's status was read just before the first call (it is not read again for that one).
    """

    def __init__(self, llm: LLM, row: RobotResult, *, checked: bool = False) -> None:
        self.llm, self.row, self.checked = llm, row, checked

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """The call, unless the turn ended: then the task is stopped (``TurnEndedError`` if its watch did not)."""
        checked, self.checked = self.checked, False
        if not checked and await blocking(_turn_ended, self.row):
            await blocking(_stop, self.row)
            run_watch.wake(self.row.pk)  # its watch reads the row now and cancels the task, waiting here
            await asyncio.sleep(3 * float(app_settings.CANCEL_POLL_INTERVAL))
            raise TurnEndedError(f"The network turn of task '{self.row.task_name}' has ended.")
        return await self.llm.complete(request, on_text=on_text)


def guard(robot: Robot, row: RobotResult, *, checked: bool = False) -> None:
    """Put ``robot``'s LLM (a task's, after its budget and checkpoint wrappers) behind a :class:`TurnGuard`.

    ``checked``: the caller has just read the turn's status (the job's start), so the first call does not again.
    """
    robot.llm = TurnGuard(robot.llm, row, checked=checked)
