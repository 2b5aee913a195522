"""The app's concrete models: :class:`Thread`, :class:`RobotResult`, :class:`RunEvent` and :class:`RunStep`.

They are built on :mod:`robotlab_django.abstract_models` and shipped with migrations. The
services look them up through ``ROBOTLAB["THREAD_MODEL"]``, ``["RESULT_MODEL"]``,
``["EVENT_MODEL"]`` and ``["STEP_MODEL"]``, so a project may use its own subclasses instead.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from .abstract_models import AbstractRobotResult, AbstractRunEvent, AbstractRunStep, AbstractThread, Status

__all__ = ["RobotResult", "RunEvent", "RunStep", "Status", "Thread"]


class Thread(AbstractThread):
    """A conversation with one or more robots."""

    class Meta(AbstractThread.Meta):
        pass


class RobotResult(AbstractRobotResult):
    """One robot run on a thread."""

    thread = models.ForeignKey(Thread, verbose_name=_("thread"), on_delete=models.CASCADE, related_name="results")

    class Meta(AbstractRobotResult.Meta):
        pass


class RunEvent(AbstractRunEvent):
    """One stream event of a run, kept for replay."""

    thread = models.ForeignKey(Thread, verbose_name=_("thread"), on_delete=models.CASCADE, related_name="events")
    result = models.ForeignKey(RobotResult, verbose_name=_("result"), null=True, blank=True,
                               on_delete=models.CASCADE, related_name="events")

    class Meta(AbstractRunEvent.Meta):
        pass


class RunStep(AbstractRunStep):
    """One checkpointed LLM call or tool call of a run, replayed when the run is executed again."""

    result = models.ForeignKey(RobotResult, verbose_name=_("result"), on_delete=models.CASCADE, related_name="steps")

    class Meta(AbstractRunStep.Meta):
        pass
