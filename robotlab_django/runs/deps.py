"""What the app gives every run's tools as ``ctx.deps``: :class:`RunDeps`, the run's user, thread and id.

A tool whose first parameter is annotated ``robotlab.RunContext[RunDeps]`` learns whom the run is for, and acts
with that user's rights (:func:`robotlab_django.tools.model_tools` does)::

    @robotlab.tool
    def my_orders(ctx: robotlab.RunContext[RunDeps]) -> list[str]:
        '''The user's open orders.'''
        return [str(order) for order in Order.objects.filter(customer=ctx.deps.user, open=True)]

Every run the app executes gets them (:func:`for_row`, called where a row's work is prepared: a robot run, a network
turn in one process, each task of a distributed turn), so every door (the chat page and its websocket, ACP and A2A,
the admin's re-run, a Celery retry, a resumed parked run) gives the same: the thread's owner, read from the
database when the run executes. A user deactivated since the run was queued stops it with
:class:`InactiveUserError`.

This module imports no model at import time: ``robotlab_django.RunDeps`` is importable before the apps are ready.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from robotlab.errors import RobotLabError

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

    from robotlab_django.abstract_models import AbstractThread
    from robotlab_django.models import RobotResult

__all__ = ["InactiveUserError", "RunDeps", "for_row"]


@dataclass(frozen=True, slots=True)
class RunDeps:
    """The ``deps`` of an app run: who it is for, in which thread, under which id.

    Attributes:
        user: The user the run acts for: the thread's owner (not a staff member who re-runs it), or an API
            token's user. ``None`` for an anonymous visitor's thread.
        thread: The run's thread, ``None`` for a run outside one.
        run_id: The run's id (its events' ``run_id``), ``None`` when it has none yet.
    """

    user: AbstractBaseUser | None
    thread: AbstractThread | None = None
    run_id: str | None = None


class InactiveUserError(RobotLabError, PermissionError):
    """The user a run acts for was deactivated (or deleted) after the run was queued: the run stops."""


def for_row(row: RobotResult, *, run_id: str | None = None, thread: AbstractThread | None = None) -> RunDeps:
    """The :class:`RunDeps` of the run on ``row``: its thread's owner, read from the database now.

    Args:
        row: The run's result row (a network task's row has its turn's thread).
        run_id: The run id the tools see (a distributed task's is its turn's); ``row.run_id`` by default.
        thread: The row's thread when the caller has just read it (with the row, as the job's delivery does);
            else it is read here.

    Raises:
        InactiveUserError: the thread's owner is deactivated, or was deleted since the thread was theirs.
    """
    from django.contrib.auth import get_user_model

    from robotlab_django import swappable

    if thread is None or thread.pk != row.thread_id:
        thread = swappable.thread_model().objects.get(pk=row.thread_id)
    user = None
    if thread.user_id is not None:
        user = get_user_model()._default_manager.filter(pk=thread.user_id).first()
        if user is None:
            raise InactiveUserError("The user this run acts for was deleted: the run stopped.")
        if not getattr(user, "is_active", True):
            raise InactiveUserError(f"The user this run acts for ({user}) is deactivated: the run stopped. "
                                    "Reactivate the user to run it again.")
    return RunDeps(user=user, thread=thread, run_id=run_id or row.run_id)
