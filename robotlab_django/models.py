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

__all__ = ["ApiToken", "BudgetLedger", "RobotResult", "RunEvent", "RunStep", "Status", "Thread", "UsageRollup"]


class Thread(AbstractThread):
    """A conversation with one or more robots."""

    class Meta(AbstractThread.Meta):
        pass


class RobotResult(AbstractRobotResult):
    """One robot run on a thread."""

    thread = models.ForeignKey(Thread, verbose_name=_("thread"), on_delete=models.CASCADE, related_name="results")

    class Meta(AbstractRobotResult.Meta):
        indexes = [  # the admin list's filters and its newest-first order, fast at millions of rows
            models.Index(fields=("-created_at", "-id"), name="robotlab_result_newest_idx"),
            models.Index(fields=("status", "-created_at"), name="robotlab_result_status_idx"),
            models.Index(fields=("model", "-created_at"), name="robotlab_result_model_idx"),
        ]


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


class UsageRollup(models.Model):
    """Runs, tokens and cost of one day, robot, model and user: kept up to date as runs finish.

    The admin's usage page and the budget checks read these few rows instead of aggregating every
    result (see :mod:`robotlab_django.rollups`).
    """

    day = models.DateField(_("day"))
    robot_name = models.CharField(_("robot"), max_length=255)
    model = models.CharField(_("model"), max_length=255, blank=True, default="")
    user_id = models.CharField(_("user id"), max_length=64, blank=True, default="",
                               help_text=_("The thread owner's primary key; empty for anonymous threads."))
    runs = models.PositiveIntegerField(_("runs"), default=0)
    input_tokens = models.BigIntegerField(_("input tokens"), default=0)
    output_tokens = models.BigIntegerField(_("output tokens"), default=0)
    cost = models.DecimalField(_("cost (USD)"), max_digits=20, decimal_places=8, default=0)

    class Meta:
        verbose_name = _("usage rollup")
        verbose_name_plural = _("usage rollups")
        constraints = [models.UniqueConstraint(fields=("day", "robot_name", "model", "user_id"),
                                               name="robotlab_rollup_key_uniq")]
        indexes = [models.Index(fields=("user_id", "day"), name="robotlab_rollup_user_idx")]

    def __str__(self) -> str:
        return f"{self.day} {self.robot_name} {self.model} {self.user_id}"


class BudgetLedger(models.Model):
    """Consumption and outstanding reservations of one budget scope on one day (see :mod:`robotlab_django.budgets`).

    ``scope`` is ``"user:<pk>"``, ``"robot:<name>"`` or ``"network:<turn run id>"``; rows change only
    through conditional updates, so worker processes share them safely.
    """

    scope = models.CharField(_("scope"), max_length=255)
    day = models.DateField(_("day"))
    consumed_tokens = models.BigIntegerField(_("consumed tokens"), default=0)
    reserved_tokens = models.BigIntegerField(_("reserved tokens"), default=0)
    consumed_cost = models.DecimalField(_("consumed cost (USD)"), max_digits=20, decimal_places=8, default=0)
    reserved_cost = models.DecimalField(_("reserved cost (USD)"), max_digits=20, decimal_places=8, default=0)

    class Meta:
        verbose_name = _("budget ledger")
        verbose_name_plural = _("budget ledgers")
        constraints = [models.UniqueConstraint(fields=("scope", "day"), name="robotlab_ledger_scope_day_uniq")]

    def __str__(self) -> str:
        return f"{self.scope} {self.day}"
