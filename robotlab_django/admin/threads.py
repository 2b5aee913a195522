"""The admin of threads: usage per thread, search and filters, the latest results inline, re-run and export.

Runs, tokens and cost per thread, the latest results inline (:mod:`~robotlab_django.admin.inlines`), a transcript
page (replies, tool calls and their results: :mod:`~robotlab_django.admin.transcripts`), and three actions:
re-run the last user message, export transcripts as JSON, erase the owners' content
(:mod:`~robotlab_django.admin.erasure`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename, get_user_model
from django.db import models
from django.db.models import Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from robotlab_django import services
from robotlab_django.admin.display import json_block, short
from robotlab_django.admin.erasure import erase_owners
from robotlab_django.admin.inlines import RobotResultInline
from robotlab_django.admin.lists import CappedPaginator, rollup_filter
from robotlab_django.admin.transcripts import TranscriptAdmin
from robotlab_django.conf import app_settings
from robotlab_django.registry import UnknownRobotError
from robotlab_django.templatetags.robotlab_format import format_cost

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from robotlab_django.models import Thread

__all__ = ["ThreadAdmin"]


class ThreadAdmin(TranscriptAdmin):
    """Threads: usage per thread, the latest results, the transcript, re-run and export."""

    list_display = ("session_id", "robot_name", "user", "short_last_message", "run_count", "total_tokens",
                    "total_cost", "last_user_message_at", "updated_at")
    list_filter = (rollup_filter("robot_name", _("robot")), "created_at", "updated_at")
    search_fields = ("session_id", "robot_name", "last_user_message", "initial_input")
    paginator = CappedPaginator
    show_full_result_count = False
    list_select_related = ("user",)
    ordering = ("-updated_at",)
    readonly_fields = ("session_id", "user", "robot_name", "initial_input", "input_metadata_display",
                       "state_data_display", "last_user_message", "last_user_message_at", "created_at",
                       "updated_at", "usage_summary")
    fields = readonly_fields
    inlines = (RobotResultInline,)
    actions = ("rerun_last_user_message", "export_transcript", erase_owners)
    change_form_template = "robotlab/admin/thread_change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Threads are created by runs."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Thread | None = None) -> bool:
        """Threads are shown read-only; runs change them."""
        return False

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        """Re-running needs the model's *change* permission (it writes a new run)."""
        codename = get_permission_codename("change", self.opts)
        return bool(request.user.has_perm(f"{self.opts.app_label}.{codename}"))

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        """The search fields plus the owner's username field."""
        return (*self.search_fields, f"user__{get_user_model().USERNAME_FIELD}")

    def get_queryset(self, request: HttpRequest) -> Any:
        """Threads with their run count, tokens and cost (correlated subqueries, computed per page row)."""
        results = self._result_model().objects.filter(thread=OuterRef("pk")).order_by().values("thread")
        return super().get_queryset(request).annotate(
            robotlab_runs=Coalesce(Subquery(results.annotate(n=Count("pk")).values("n")), 0),
            robotlab_tokens=Coalesce(
                Subquery(results.annotate(n=Sum(F("input_tokens") + F("output_tokens"))).values("n")), 0),
            robotlab_cost=Coalesce(
                Subquery(results.annotate(n=Sum("cost")).values("n"),
                         output_field=models.DecimalField(max_digits=20, decimal_places=8)),
                Decimal(0), output_field=models.DecimalField(max_digits=20, decimal_places=8)),
        )

    @admin.display(description=_("last user message"))
    def short_last_message(self, obj: Thread) -> str:
        """The last user message, shortened."""
        return short(obj.last_user_message)

    @admin.display(description=_("runs"), ordering="robotlab_runs")
    def run_count(self, obj: Thread) -> int:
        """How many results the thread has."""
        return int(getattr(obj, "robotlab_runs", 0))

    @admin.display(description=_("tokens"), ordering="robotlab_tokens")
    def total_tokens(self, obj: Thread) -> int:
        """Input plus output tokens over all runs."""
        return int(getattr(obj, "robotlab_tokens", 0))

    @admin.display(description=_("cost"), ordering="robotlab_cost")
    def total_cost(self, obj: Thread) -> str:
        """Cost over all runs, in USD."""
        return format_cost(getattr(obj, "robotlab_cost", 0))

    @admin.display(description=_("input metadata"))
    def input_metadata_display(self, obj: Thread) -> str:
        """``input_metadata``, pretty-printed."""
        return json_block(obj.input_metadata)

    @admin.display(description=_("state data"))
    def state_data_display(self, obj: Thread) -> str:
        """``state_data``, pretty-printed."""
        return json_block(obj.state_data)

    @admin.display(description=_("usage"))
    def usage_summary(self, obj: Thread) -> str:
        """Runs, tokens and cost of the thread."""
        return format_html("{} runs, {} input + {} output tokens, {}", self.run_count(obj),
                           *self._token_split(obj), self.total_cost(obj))

    def _token_split(self, obj: Thread) -> tuple[int, int]:
        totals = obj.results.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
        return int(totals["i"] or 0), int(totals["o"] or 0)

    @admin.action(description=_("Re-run last user message"), permissions=["rerun"])
    def rerun_last_user_message(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        """Queue each selected thread's last user message again, for the same robot."""
        started, problems = 0, []
        for thread in queryset:
            try:
                services.rerun_last_user_message(thread)
            except (services.NothingToRerunError, UnknownRobotError) as exc:
                problems.append(str(exc))
            else:
                started += 1
        if started:
            self.message_user(request, _("Re-ran the last user message of %(count)d thread(s) (executor: %(mode)s).")
                              % {"count": started, "mode": app_settings.EXECUTOR}, messages.SUCCESS)
        for problem in problems:
            self.message_user(request, problem, messages.WARNING)
