"""The app's concrete models: a thread, its results, their events, steps and spans, API tokens and tool effects.

:class:`Thread`, :class:`RobotResult`, :class:`RunEvent`, :class:`RunStep` and :class:`RunSpan` are built on
:mod:`robotlab_django.abstract_models` and shipped with migrations. The services look them up through
``ROBOTLAB["THREAD_MODEL"]``, ``["RESULT_MODEL"]``, ``["EVENT_MODEL"]``, ``["STEP_MODEL"]`` and
``["SPAN_MODEL"]``, so a project may use its own subclasses instead.

:class:`ToolApproval` is a proxy of :class:`RobotResult` for the runs waiting for a person's approval of a tool
call; it carries the ``robotlab.approve_toolcall`` permission (see :mod:`robotlab_django.runs.approvals`).

The other models are defined by concept beside the code that uses them, and imported here, where Django finds
them (one app, one set of migrations): the accounting ones (:mod:`robotlab_django.accounting.models`), robot
versions and labels (:mod:`robotlab_django.versions.models`), evals with the online scores
(:mod:`robotlab_django.evals.models`) and the A2A push-notification configs
(:mod:`robotlab_django.protocols.push_models`). Import any of them from this module.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from robotlab_django.abstract_models import (
    AbstractRobotResult,
    AbstractRunEvent,
    AbstractRunSpan,
    AbstractRunStep,
    AbstractThread,
    Status,
)
from robotlab_django.accounting.models import BudgetLedger, BudgetReservation, UsageRollup
from robotlab_django.encoders import RobotLabJSONEncoder
from robotlab_django.evals.models import EvalCase, EvalCaseResult, EvalRun, EvalSet, OnlineScore
from robotlab_django.protocols.push_models import PushNotificationConfig
from robotlab_django.storable import StorableCharField, StorableJSONField, StorableTextField
from robotlab_django.versions.models import RobotLabel, RobotVersion

__all__ = ["ApiToken", "BudgetLedger", "BudgetReservation", "EvalCase", "EvalCaseResult", "EvalRun", "EvalSet",
           "OnlineScore", "PushNotificationConfig", "RobotLabel", "RobotResult", "RobotVersion", "RunEvent", "RunSpan",
           "RunStep", "Status", "Thread", "ToolApproval", "ToolEffect", "UsageRollup"]


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


class ToolApproval(RobotResult):
    """A run parked until a person approves or denies a tool call (its ``question`` says which call).

    A proxy: the rows are the results' own. Its permission ``robotlab.approve_toolcall`` lets staff approve or deny
    the tool calls of anyone's runs; a run's own user needs none.
    """

    class Meta:
        proxy = True
        verbose_name = _("tool approval")
        verbose_name_plural = _("tool approvals")
        permissions = [("approve_toolcall", _("Can approve or deny the tool calls of anyone's runs"))]


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


class RunSpan(AbstractRunSpan):
    """One OpenTelemetry span of a run (``ROBOTLAB["TRACES"]``), pruned and erased with its run."""

    result = models.ForeignKey(RobotResult, verbose_name=_("result"), on_delete=models.CASCADE, related_name="spans")

    class Meta(AbstractRunSpan.Meta):
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
    expires_at = models.DateTimeField(_("expires at"), null=True, blank=True,
                                      help_text=_("Requests with the token get 401 from then on; empty: never."))

    class Meta:
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class ToolEffect(models.Model):
    """One call of a tool with side effects, journaled before it runs so that it happens once.

    ``key`` is its idempotency key (the result row, the step, the model's tool-call id); what a run executed again
    does on meeting each ``status`` is :mod:`robotlab_django.runs.effects`'s.
    """

    class Status(models.TextChoices):
        """Where a call stands: started -> completed, failed or denied (by its approver); unknown until resolved."""

        STARTED = "started", _("started")
        COMPLETED = "completed", _("completed")
        FAILED = "failed", _("failed")
        DENIED = "denied", _("denied")
        UNKNOWN = "unknown", _("outcome unknown")
        RETRY = "retry", _("to be retried")

    key = models.CharField(_("idempotency key"), max_length=255, unique=True)
    result_pk = models.CharField(_("run row"), max_length=64, db_index=True)
    run_id = models.CharField(_("run id"), max_length=64, db_index=True)
    step = models.PositiveIntegerField(_("step"))
    call_id = StorableCharField(_("tool-call id"), max_length=255, blank=True, default="")
    robot_name = models.CharField(_("robot"), max_length=255)
    tool_name = models.CharField(_("tool"), max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("user"), null=True, blank=True,
                             on_delete=models.SET_NULL, related_name="+")
    arguments = StorableJSONField(_("arguments"), default=dict, blank=True, encoder=RobotLabJSONEncoder)
    status = models.CharField(_("status"), max_length=12, choices=Status.choices, default=Status.STARTED)
    result = StorableJSONField(_("result"), default=dict, blank=True, encoder=RobotLabJSONEncoder,
                               help_text=_('What the model read: {"json": <JSON text>} or {"text": <text>}.'))
    error = StorableTextField(_("error"), blank=True, default="")
    atomic = models.BooleanField(_("atomic"), default=False,
                                 help_text=_("Its tool's writes commit with this row: a started call wrote nothing."))
    attempts = models.PositiveIntegerField(_("attempts"), default=1)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("resolved by"), null=True, blank=True,
                                    on_delete=models.SET_NULL, related_name="+")
    resolved_at = models.DateTimeField(_("resolved at"), null=True, blank=True)

    class Meta:
        verbose_name = _("tool effect")
        verbose_name_plural = _("tool effects")
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("status", "-created_at"), name="robotlab_effect_status_idx"),
                   models.Index(fields=("robot_name", "tool_name"), name="robotlab_effect_tool_idx")]

    def __str__(self) -> str:
        return f"{self.tool_name} #{self.step} ({self.status})"
