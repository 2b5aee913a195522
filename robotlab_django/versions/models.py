"""The versions models: a robot's versions (prompt, model, parameters, tools, budget) and the labels that pick one.

Defined here, by concept, and imported by :mod:`robotlab_django.models`, where Django (and the rest of the app) finds
them: import them from there. :mod:`robotlab_django.versions` applies them to runs.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from robotlab_django.encoders import RobotLabJSONEncoder
from robotlab_django.storable import StorableCharField, StorableJSONField, StorableTextField

__all__ = ["RobotLabel", "RobotVersion"]


class RobotVersion(models.Model):
    """One version of a registered robot's editable parts: prompt, model, parameters, tools, budget.

    A robot without versions runs from its code; empty parts keep the code's (see
    :mod:`robotlab_django.versions`). ``number`` counts a robot's versions from 1.
    """

    robot_name = StorableCharField(_("robot"), max_length=255, db_index=True)
    number = models.PositiveIntegerField(_("number"))
    prompt = StorableTextField(_("prompt"), blank=True, default="",
                               help_text=_("Template text (Jinja, optional front matter) that replaces the code's "
                                           "template and system prompt; empty: the code's."))
    model = StorableCharField(_("model"), max_length=255, blank=True, default="",
                              help_text=_("Empty: the code's model."))
    params = StorableJSONField(_("model parameters"), default=dict, blank=True, encoder=RobotLabJSONEncoder,
                               help_text=_('Such as {"temperature": 0.2, "max_tokens": 500}.'))
    tools = StorableJSONField(_("tools"), null=True, blank=True, encoder=RobotLabJSONEncoder,
                              help_text=_("The names of the code's tools it may use; empty: all of them."))
    token_budget = models.PositiveBigIntegerField(_("token budget"), null=True, blank=True)
    cost_budget = models.DecimalField(_("cost budget (USD)"), max_digits=14, decimal_places=6, null=True, blank=True)
    note = StorableCharField(_("note"), max_length=255, blank=True, default="")
    is_current = models.BooleanField(_("current"), default=False,
                                     help_text=_("The version new threads run, outside a rollout."))
    made_current_at = models.DateTimeField(_("made current at"), null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, verbose_name=_("created by"), null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("robot version")
        verbose_name_plural = _("robot versions")
        ordering = ("robot_name", "-number")
        constraints = [
            models.UniqueConstraint(fields=("robot_name", "number"), name="robotlab_version_number_uniq"),
            models.UniqueConstraint(fields=("robot_name",), condition=models.Q(is_current=True),
                                    name="robotlab_version_one_current"),
        ]

    def __str__(self) -> str:
        return f"{self.robot_name} v{self.number}"


class RobotLabel(models.Model):
    """A name (``production``, ``canary``...) pointing at one version of a robot, with its rollout share."""

    robot_name = StorableCharField(_("robot"), max_length=255)
    name = StorableCharField(_("label"), max_length=64)
    version = models.ForeignKey(RobotVersion, verbose_name=_("version"), on_delete=models.CASCADE,
                                related_name="labels")
    rollout_percent = models.PositiveSmallIntegerField(
        _("rollout (%)"), default=0, validators=[MaxValueValidator(100)],
        help_text=_("The share of new threads that run this label's version (0-100)."))
    updated_at = models.DateTimeField(_("updated at"), auto_now=True)

    class Meta:
        verbose_name = _("robot label")
        verbose_name_plural = _("robot labels")
        ordering = ("robot_name", "name")
        constraints = [models.UniqueConstraint(fields=("robot_name", "name"), name="robotlab_label_name_uniq")]

    def __str__(self) -> str:
        return f"{self.robot_name}@{self.name}"

    def clean(self) -> None:
        """A label points at a version of its own robot."""
        if self.version_id is not None and self.version.robot_name != self.robot_name:
            raise ValidationError({"version": _("Choose a version of this label's robot.")})
