"""The evals models: eval sets, their cases, runs of a set against a robot version, each case's result, online scores.

Defined here, by concept, and imported by :mod:`robotlab_django.models`, where Django (and the rest of the app) finds
them: import them from there. A case's source run and a case result's run are the app's ``RobotResult`` rows, named
by their label (``robotlab.RobotResult``) since :mod:`robotlab_django.models` imports this module.

:class:`OnlineScore` is a production run sampled by its robot's online evals (``ROBOTLAB["ONLINE_EVALS"]``): the
scoring is :mod:`robotlab_django.evals.online_scoring`'s; the admin's usage page charts the rolling score per
version (:mod:`robotlab_django.evals.rolling`).
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from robotlab_django.encoders import RobotLabJSONEncoder
from robotlab_django.storable import CostField, StorableCharField, StorableJSONField, StorableTextField
from robotlab_django.versions.models import RobotVersion

__all__ = ["EvalCase", "EvalCaseResult", "EvalRun", "EvalSet", "OnlineScore"]


class EvalSet(models.Model):
    """A named set of eval cases."""

    name = StorableCharField(_("name"), max_length=255, unique=True)
    description = StorableTextField(_("description"), blank=True, default="")
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("eval set")
        verbose_name_plural = _("eval sets")
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class EvalCase(models.Model):
    """One case: the conversation before a turn, the turn's message, a reference reply and expectations.

    ``expectations`` is a list of evaluator specs (:mod:`robotlab_django.evals.evaluators`); ``recorded`` the
    model's responses of the run it came from, which an offline eval replays.
    """

    eval_set = models.ForeignKey(EvalSet, verbose_name=_("eval set"), on_delete=models.CASCADE,
                                 related_name="cases")
    name = StorableCharField(_("name"), max_length=255, blank=True, default="")
    history = StorableJSONField(_("history"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                                help_text=_("The thread's chat messages before the turn (OpenAI format)."))
    input = StorableTextField(_("input"), blank=True, default="")
    reference = StorableTextField(_("reference reply"), blank=True, default="")
    expectations = StorableJSONField(_("expectations"), default=list, blank=True, encoder=RobotLabJSONEncoder)
    recorded = StorableJSONField(_("recorded model outputs"), default=list, blank=True, encoder=RobotLabJSONEncoder)
    source = models.ForeignKey("robotlab.RobotResult", verbose_name=_("source run"), null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("eval case")
        verbose_name_plural = _("eval cases")
        ordering = ("eval_set", "id")

    def __str__(self) -> str:
        return self.name or f"case {self.pk}"


class EvalRun(models.Model):
    """One run of an eval set against a robot version: its score, tokens, cost and time."""

    eval_set = models.ForeignKey(EvalSet, verbose_name=_("eval set"), on_delete=models.CASCADE, related_name="runs")
    robot_name = StorableCharField(_("robot"), max_length=255)
    version = models.ForeignKey(RobotVersion, verbose_name=_("version"), null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="eval_runs")
    offline = models.BooleanField(_("offline"), default=False)
    score = models.FloatField(_("score"), null=True, blank=True)
    passed = models.PositiveIntegerField(_("passed"), default=0)
    cases = models.PositiveIntegerField(_("cases"), default=0)
    input_tokens = models.BigIntegerField(_("input tokens"), default=0)
    output_tokens = models.BigIntegerField(_("output tokens"), default=0)
    cost = CostField(_("cost (USD)"), max_digits=14, decimal_places=8, default=0)
    duration = models.FloatField(_("duration (s)"), null=True, blank=True)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("eval run")
        verbose_name_plural = _("eval runs")
        ordering = ("-created_at",)

    def __str__(self) -> str:
        return f"{self.eval_set} on {self.version or self.robot_name}"


class EvalCaseResult(models.Model):
    """One case of an eval run: its reply, each evaluator's score and reason, tokens, cost, latency."""

    eval_run = models.ForeignKey(EvalRun, verbose_name=_("eval run"), on_delete=models.CASCADE,
                                 related_name="results")
    case = models.ForeignKey(EvalCase, verbose_name=_("case"), on_delete=models.CASCADE, related_name="+")
    result = models.ForeignKey("robotlab.RobotResult", verbose_name=_("run"), null=True, blank=True,
                               on_delete=models.SET_NULL, related_name="+")
    reply = StorableTextField(_("reply"), blank=True, default="")
    score = models.FloatField(_("score"), default=0)
    scores = StorableJSONField(_("scores"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                               help_text=_("Each evaluator's kind, score and reason."))
    error = StorableTextField(_("error"), blank=True, default="")
    input_tokens = models.PositiveIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveIntegerField(_("output tokens"), default=0)
    cost = CostField(_("cost (USD)"), max_digits=14, decimal_places=8, default=0)
    latency = models.FloatField(_("latency (s)"), null=True, blank=True)

    class Meta:
        verbose_name = _("eval case result")
        verbose_name_plural = _("eval case results")
        ordering = ("eval_run", "case")

    def __str__(self) -> str:
        return f"{self.case}: {self.score:.2f}"


class OnlineScore(models.Model):
    """One completed run scored in the background by its robot's online evaluators.

    ``score`` is the mean of the evaluators that could score the run (``None``: none could; each one's kind,
    score and reason, or error, is in ``scores``). ``version`` is the version the run ran, ``code_hash`` the code's
    prompt hash when it ran no version. The row goes with its run (``result``, deleted with it). When
    ``RESULT_MODEL`` is a project's own model, ``result`` stays empty and the reasons are not kept (nothing of the
    run's text outlives its erasure); ``run_id`` names the run either way.
    """

    robot_name = StorableCharField(_("robot"), max_length=255)
    version = models.ForeignKey("robotlab.RobotVersion", verbose_name=_("version"), null=True, blank=True,
                                on_delete=models.SET_NULL, related_name="online_scores")
    code_hash = StorableCharField(_("code's prompt hash"), max_length=64, blank=True, default="")
    result = models.ForeignKey("robotlab.RobotResult", verbose_name=_("run"), null=True, blank=True,
                               on_delete=models.CASCADE, related_name="+")
    run_id = StorableCharField(_("run id"), max_length=64, unique=True)
    score = models.FloatField(_("score"), null=True, blank=True,
                              help_text=_("The mean of the evaluators' scores; empty: no evaluator could score."))
    scores = StorableJSONField(_("scores"), default=list, blank=True, encoder=RobotLabJSONEncoder,
                               help_text=_("Each evaluator's kind, score and reason (or error)."))
    input_tokens = models.PositiveIntegerField(_("input tokens"), default=0)
    output_tokens = models.PositiveIntegerField(_("output tokens"), default=0)
    cost = CostField(_("cost (USD)"), max_digits=14, decimal_places=8, default=Decimal(0),
                     help_text=_("What the evaluators spent (a judge's model calls)."))
    created_at = models.DateTimeField(_("scored at"), default=timezone.now)

    class Meta:
        verbose_name = _("online score")
        verbose_name_plural = _("online scores")
        ordering = ("-created_at",)
        indexes = [models.Index(fields=("robot_name", "created_at"), name="robotlab_online_robot_day")]

    def __str__(self) -> str:
        score = "-" if self.score is None else f"{self.score:.2f}"
        return f"{self.robot_name} run {self.run_id}: {score}"
