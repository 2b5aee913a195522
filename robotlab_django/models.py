"""The app's concrete models: :class:`Thread`, :class:`RobotResult`, :class:`RunEvent` and :class:`RunStep`.

They are built on :mod:`robotlab_django.abstract_models` and shipped with migrations. The
services look them up through ``ROBOTLAB["THREAD_MODEL"]``, ``["RESULT_MODEL"]``,
``["EVENT_MODEL"]`` and ``["STEP_MODEL"]``, so a project may use its own subclasses instead.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .abstract_models import AbstractRobotResult, AbstractRunEvent, AbstractRunStep, AbstractThread, Status

__all__ = ["ApiToken", "RobotResult", "RunEvent", "RunStep", "Status", "Thread"]


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


class ApiToken(models.Model):
    """An API token of a user for the protocol servers (ACP, A2A); only its SHA-256 digest is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("user"), on_delete=models.CASCADE,
                             related_name="robotlab_api_tokens")
    name = models.CharField(_("name"), max_length=100, blank=True, default="")
    prefix = models.CharField(_("prefix"), max_length=12, help_text=_("The token's first characters, to tell "
                                                                      "tokens apart."))
    digest = models.CharField(_("digest"), max_length=64, unique=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"
