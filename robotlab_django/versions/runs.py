"""The version a run row runs: pinned on the row, else chosen for its thread; applied and recorded on the row.

:func:`robotlab_django.runs.runnables.prepare` calls :func:`apply_to_run` on every robot it builds for a row,
so a run's row says what ran: its ``version``, or ``code_hash`` (:func:`~.parts.prompt_hash`) when the robot
ran from its code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from robotlab_django.models import RobotVersion
from robotlab_django.versions.choice import choose
from robotlab_django.versions.parts import apply, prompt_hash

if TYPE_CHECKING:
    from robotlab.robot import Robot
    from robotlab_django.models import RobotResult

__all__ = ["apply_to_run"]


def apply_to_run(robot: Robot, row: RobotResult) -> RobotVersion | None:
    """Apply the version ``row`` runs to ``robot`` and record it (or the code's hash) on ``row``.

    A row whose ``version`` is set (an eval's pin, or an earlier attempt's choice) keeps it; otherwise the
    version is chosen for the row's thread (:func:`~.choice.choose`). Returns the version, ``None`` for the code.
    """
    version: RobotVersion | None = None
    if row.version_id is not None:
        version = RobotVersion.objects.filter(pk=row.version_id).first()
    if version is None:
        version = choose(row.robot_name, row.thread_id)
    if version is not None:
        apply(robot, version)
        fields: dict[str, Any] = {"version": version, "code_hash": ""}
    else:
        fields = {"version": None, "code_hash": prompt_hash(robot)}
    for name, value in fields.items():
        setattr(row, name, value)
    type(row).objects.filter(pk=row.pk).update(**fields)
    return version
