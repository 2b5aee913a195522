"""The admin's read-only inlines: a thread's newest results, and a result's checkpointed steps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from robotlab_django.admin.display import short
from robotlab_django.admin.traces import span_model_of
from robotlab_django.admin.transcripts import result_change_url_name
from robotlab_django.models import RobotResult, RunStep
from robotlab_django.templatetags.robotlab_format import format_cost

if TYPE_CHECKING:
    from robotlab_django.models import Thread

__all__ = ["INLINE_RESULTS", "LatestResultsFormSet", "RobotResultInline", "RunStepInline"]

#: Results shown inline on a thread's page (the newest); the transcript view shows them all.
INLINE_RESULTS = 50


class LatestResultsFormSet(BaseInlineFormSet):  # type: ignore[type-arg]
    """The inline formset limited to the newest :data:`INLINE_RESULTS` results."""

    def get_queryset(self) -> Any:
        """The newest results, newest first, each with the number of its spans kept (``robotlab_spans``)."""
        if not hasattr(self, "_latest"):
            queryset = super().get_queryset()
            spans = span_model_of(queryset.model)
            if spans is not None:  # one subquery per shown row, on the spans' result index
                counted = (spans._default_manager.filter(result=OuterRef("pk")).order_by()
                           .values("result").annotate(n=Count("pk")).values("n"))
                queryset = queryset.annotate(robotlab_spans=Coalesce(Subquery(counted), 0))
            self._latest = queryset.order_by("-sequence_number")[:INLINE_RESULTS]
        return self._latest


class RobotResultInline(admin.TabularInline):  # type: ignore[type-arg]
    """A thread's newest results, read-only, linking to each result."""

    model = RobotResult
    formset = LatestResultsFormSet
    fields = ("sequence_number", "robot_name", "status", "short_input", "short_reply", "input_tokens",
              "output_tokens", "cost_display", "trace_link", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = _("latest results")

    def has_add_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        """Results are written by runs, never by hand."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        """Results are read-only."""
        return False

    @admin.display(description=_("input"))
    def short_input(self, obj: RobotResult) -> str:
        """The user message, shortened."""
        return short(obj.input)

    @admin.display(description=_("reply"))
    def short_reply(self, obj: RobotResult) -> str:
        """The reply (or the error), shortened."""
        return short(obj.reply or obj.error)

    @admin.display(description=_("cost"))
    def cost_display(self, obj: RobotResult) -> str:
        """The cost in USD."""
        return format_cost(obj.cost)

    @admin.display(description=_("trace"))
    def trace_link(self, obj: RobotResult) -> str:
        """A link to the run's trace on its page (``12 spans``), or ``-`` when none was kept."""
        count = int(getattr(obj, "robotlab_spans", 0) or 0)
        if not count or obj.pk is None:
            return "-"
        url = reverse(result_change_url_name(type(obj)), args=[obj.pk], current_app=self.admin_site.name)
        label = ngettext("%(count)d span", "%(count)d spans", count) % {"count": count}
        return format_html('<a href="{}#robotlab-trace" class="robotlab-trace-link">{}</a>', url, label)


class RunStepInline(admin.TabularInline):  # type: ignore[type-arg]
    """A result's checkpointed steps (LLM calls and tool calls), read-only, in order."""

    model = RunStep
    fields = ("idx", "kind", "short_output", "fingerprint", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("steps (checkpointed LLM and tool calls)")

    def has_add_permission(self, request: HttpRequest, obj: RobotResult | None = None) -> bool:
        """Steps are written by runs, never by hand."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: RobotResult | None = None) -> bool:
        """Steps are read-only."""
        return False

    @admin.display(description=_("output"))
    def short_output(self, obj: RunStep) -> str:
        """The reply text or tool calls of an LLM step, the result of a tool step, shortened."""
        output = obj.output or {}
        if "json" in output or "text" in output:
            return short(output.get("json", output.get("text")), 120)
        calls = ", ".join(f"{call.get('name')}({call.get('arguments')})" for call in output.get("tool_calls") or [])
        return short(" ".join(filter(None, [output.get("content"), calls])), 120)
