"""Robot jobs: a robot run you start now (:meth:`RobotJob.run`) or in the background (:meth:`RobotJob.enqueue`).

``manage.py startrobotjob Support`` writes a module with ``support_job = robot_job(SupportRobot)``.
``enqueue`` goes through the configured executor (``ROBOTLAB["EXECUTOR"]``: a background thread
of this process by default); ``queue`` is kept for queue-based executors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from robotlab.errors import RobotLabError
from robotlab_django.conf import app_settings

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab.llm import LLM
    from robotlab_django.models import RobotResult
    from robotlab_django.runs.records import ThreadRef

__all__ = ["RobotJob", "RobotNotSpecifiedError", "robot_job"]


class RobotNotSpecifiedError(RobotLabError, ValueError):
    """Neither the job nor the call names a robot."""

    def __init__(self) -> None:
        super().__init__("No robot specified. Pass robot= to run() or enqueue(), or create the job with "
                         "robot_job(<robot>).")


class RobotJob:
    """Runs one robot (or the robot each call names) on threads.

    Args:
        robot: A registered robot name, or its class or function; ``None`` to name it per call.
        queue: The queue for queue-based executors (``ROBOTLAB["TASK_QUEUE"]`` when ``None``).
    """

    def __init__(self, robot: object = None, *, queue: str | None = None) -> None:
        self.robot = robot
        self._queue = queue

    @property
    def queue(self) -> str:
        """The job's queue name."""
        return self._queue or str(app_settings.TASK_QUEUE)

    def _robot(self, robot: object) -> object:
        chosen = robot if robot is not None else self.robot
        if chosen is None:
            raise RobotNotSpecifiedError()
        return chosen

    def run(self, message: object, *, thread: ThreadRef = None, robot: object = None, user: _AnyUser | None = None,
            llm: LLM | None = None, robot_options: Mapping[str, Any] | None = None,
            raise_errors: bool = True) -> RobotResult:
        """Run now and return the stored result row (see :func:`robotlab_django.services.run_robot`).

        ``thread`` is a thread, its primary key, a session id (created when missing) or ``None``
        for a new thread.
        """
        from robotlab_django import services

        return services.run_robot(thread, self._robot(robot), message, user=user, llm=llm,
                                  robot_options=robot_options, raise_errors=raise_errors)

    def enqueue(self, message: object, *, thread: ThreadRef = None, robot: object = None,
                user: _AnyUser | None = None) -> RobotResult:
        """Queue a run and hand it to the executor; returns the ``queued`` row.

        With the ``thread`` executor the run starts once the current transaction commits.
        """
        from robotlab_django import services
        from robotlab_django.runs import executor

        row = services.start_run(thread, self._robot(robot), message, user=user)
        executor.dispatch(row, queue=self.queue)
        return row

    def __repr__(self) -> str:
        return f"RobotJob(robot={self.robot!r}, queue={self.queue!r})"


def robot_job(robot: object, *,
 queue: str | None = None) -> RobotJob:
    """A :class:`RobotJob` bound to ``robot``."""
    return RobotJob(robot, queue=queue)
