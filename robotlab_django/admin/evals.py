"""The admin of evals: eval sets, their cases (one added from a stored run's page), and eval runs with their scores.

A run's page links to "Add to an eval set": the case form comes filled from the run (the thread's messages
before it, its message, its stored reply as the reference, its model outputs). Eval runs are read-only; two of them
are compared side by side by the list's "compare" action (:mod:`robotlab_django.admin.eval_compare`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from robotlab_django import swappable
from robotlab_django.admin.eval_compare import EvalRunCompareAdmin
from robotlab_django.evals.cases import recorded_outputs
from robotlab_django.models import EvalCase, EvalCaseResult, EvalRun, EvalSet
from robotlab_django.runs.history import load_history

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["EvalCaseAdmin", "EvalRunAdmin", "EvalSetAdmin", "add_to_eval_set_link"]


@admin.display(description=_("eval"))
def add_to_eval_set_link(modeladmin: admin.ModelAdmin[Any], obj: RobotResult | None) -> str:
    """A link to a new eval case filled from the run ``obj`` (a result admin's method: ``eval_link = this``)."""
    if obj is None or obj.pk is None:
        return ""
    return format_html('<a href="{}?source={}">{}</a>', reverse("admin:robotlab_evalcase_add"), obj.pk,
                       _("Add to an eval set"))


class EvalCaseInline(admin.TabularInline):  # type: ignore[type-arg]
    """The cases of a set, by name."""

    model = EvalCase
    fields = ("name", "input", "reference")
    show_change_link = True
    extra = 0


@admin.register(EvalSet)
class EvalSetAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Eval sets and their cases."""

    list_display = ("name", "description", "created_at")
    search_fields = ("name",)
    inlines = (EvalCaseInline,)


@admin.register(EvalCase)
class EvalCaseAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Eval cases; a new one may start from a stored run (``?source=<run pk>``)."""

    list_display = ("__str__", "eval_set", "input", "created_at")
    list_filter = ("eval_set",)
    search_fields = ("name", "input", "reference")
    fields = ("eval_set", "name", "history", "input", "reference", "expectations", "recorded", "source")
    raw_id_fields = ("source",)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        """The fields of a case from the run ``?source=`` names, when the user may view that run."""
        initial: dict[str, Any] = dict(super().get_changeform_initial_data(request))
        source = request.GET.get("source", "")
        model = swappable.result_model()
        if not source.isdigit() or not request.user.has_perm(
                f"{model._meta.app_label}.view_{model._meta.model_name}"):
            return initial
        row = model.objects.filter(pk=int(source)).first()
        if row is not None:
            initial.update(source=row.pk, name=f"{row.robot_name} #{row.sequence_number} of thread {row.thread_id}",
                           history=load_history(row.thread_id, before=row.sequence_number), input=row.input,
                           reference=row.reply, recorded=recorded_outputs(row), expectations=[])
        return initial


class EvalCaseResultInline(admin.TabularInline):  # type: ignore[type-arg]
    """Each case's score, reasons, usage and latency."""

    model = EvalCaseResult
    fields = ("case", "score", "scores", "reply", "error", "input_tokens", "output_tokens", "cost", "latency")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: EvalRun | None = None) -> bool:
        """Results come from ``manage.py robotlab_eval``."""
        return False


@admin.register(EvalRun)
class EvalRunAdmin(EvalRunCompareAdmin):
    """Eval runs, read-only: score, passed cases, tokens, cost and time; the cases' results inline; two compared."""

    list_display = ("__str__", "robot_name", "version", "offline", "score", "passed", "cases", "cost", "duration",
                    "created_at")
    list_filter = ("robot_name", "eval_set", "offline")
    fields = ("eval_set", "robot_name", "version", "offline", "score", "passed", "cases", "input_tokens",
              "output_tokens", "cost", "duration", "created_at", "compare_link")
    readonly_fields = fields
    inlines = (EvalCaseResultInline,)
    actions = ("compare_runs",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Eval runs come from ``manage.py robotlab_eval``."""
        return False
