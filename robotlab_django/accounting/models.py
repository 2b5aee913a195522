"""The accounting models: daily usage rollups, budget ledgers and the reservations of model calls in flight.

Defined here, by concept, and imported by :mod:`robotlab_django.models`, where Django (and the rest of the app) finds
them: import them from there. :mod:`robotlab_django.accounting.rollups` keeps the rollups up to date,
:mod:`robotlab_django.accounting.budgets` the ledgers and reservations.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["BudgetLedger", "BudgetReservation", "UsageRollup"]


class UsageRollup(models.Model):
    """Runs, tokens and cost of one day, robot, model and user: kept up to date as runs finish.

    The admin's usage page and the budget checks read these few rows instead of aggregating every
    result (see :mod:`robotlab_django.accounting.rollups`).
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
    """Consumption and outstanding reservations of one budget scope on one day (see :mod:`~.budgets`).

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


class BudgetReservation(models.Model):
    """One model call's reservation in one budget scope, held while the call runs (see :mod:`~.budgets`).

    Its tokens and cost are also counted in the scope's :class:`BudgetLedger` ``reserved_*`` columns; the
    call's reconciliation deletes it. ``owner`` is the primary key of the run's result row, so a run whose
    worker died leaks nothing: its retry, ``robotlab_requeue_stuck`` or the reservation's expiry
    (``ROBOTLAB["BUDGETS"]["RESERVATION_TTL"]``) releases it.
    """

    scope = models.CharField(_("scope"), max_length=255)
    day = models.DateField(_("day"))
    owner = models.CharField(_("run"), max_length=64, db_index=True,
                             help_text=_("The primary key of the result row whose model call holds it."))
    tokens = models.BigIntegerField(_("tokens"), default=0)
    cost = models.DecimalField(_("cost (USD)"), max_digits=20, decimal_places=8, default=0)
    created_at = models.DateTimeField(_("created at"), default=timezone.now)

    class Meta:
        verbose_name = _("budget reservation")
        verbose_name_plural = _("budget reservations")
        indexes = [models.Index(fields=("scope", "created_at"), name="robotlab_reservation_age_idx")]

    def __str__(self) -> str:
        return f"{self.scope} {self.day} {self.owner}: {self.tokens}"
