"""The admin: threads with their results inline, read-only results, a transcript view and usage charts.

* Threads: runs, tokens and cost per thread, search and filters, the latest results inline,
  a transcript page (replies, tool calls and their results), and three actions: re-run the last
  user message, export transcripts as JSON, erase the owners' content (:mod:`.erasure_admin`).
* Results: read-only, filtered by robot, status, model and date, searchable, with token and
  cost columns, totals of the filtered list, a usage page charting tokens and cost per day
  by robot and model, and each result's checkpointed steps inline.

All model and user text is rendered by templates with autoescaping, or through
``format_html``, which escapes its arguments; nothing here marks such text safe.
:func:`register_models` registers the same admin for a project's own models.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename, get_user_model
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import models
from django.db.models import Count, F, OuterRef, Subquery, Sum
from django.db.models.functions import Coalesce
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from . import services
from .admin_control import cancel_runs, status_and_question
from .admin_lists import CappedPaginator, list_totals, rollup_filter, today_spend
from .conf import app_settings
from .encoders import RobotLabJSONEncoder
from .erasure_admin import erase_owners
from .models import RobotResult, RunStep, Thread
from .registry import UnknownRobotError
from .rollups import rollup_model
from .templatetags.robotlab_format import format_cost
from .transcript import export_threads, run_items, transcript_runs
from .turn_graph import turn_graph
from .usage import daily_usage

__all__ = ["RobotResultAdmin", "RobotResultInline", "RunStepInline", "ThreadAdmin", "register_models"]

#: Results shown inline on a thread's page (the newest); the transcript view shows them all.
INLINE_RESULTS = 50
#: Runs per page of the transcript view.
TRANSCRIPT_PAGE_SIZE = 100


def _short(text: str | None, length: int = 60) -> str:
    return Truncator(text or "").chars(length)


def _json_block(value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, cls=RobotLabJSONEncoder)
    return format_html('<pre class="robotlab-json">{}</pre>', text)


def _route(opts: Any, suffix: str) -> str:
    """The URL name of an admin view of a model (without the ``admin:`` namespace)."""
    return f"{opts.app_label}_{opts.model_name}_{suffix}"


def _filename(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "thread"


class _URLs:
    """Reversing this model admin's own URLs."""

    opts: Any
    admin_site: admin.AdminSite

    def _url(self, suffix: str, *args: Any) -> str:
        return reverse(f"admin:{_route(self.opts, suffix)}", args=args or None, current_app=self.admin_site.name)


class LatestResultsFormSet(BaseInlineFormSet):  # type: ignore[type-arg]
    """The inline formset limited to the newest :data:`INLINE_RESULTS` results."""

    def get_queryset(self) -> Any:
        """The newest results, newest first."""
        if not hasattr(self, "_latest"):
            self._latest = super().get_queryset().order_by("-sequence_number")[:INLINE_RESULTS]
        return self._latest


class RobotResultInline(admin.TabularInline):  # type: ignore[type-arg]
    """A thread's newest results, read-only, linking to each result."""

    model = RobotResult
    formset = LatestResultsFormSet
    fields = ("sequence_number", "robot_name", "status", "short_input", "short_reply", "input_tokens",
              "output_tokens", "cost_display", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name_plural = _("latest results")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Results are written by runs, never by hand."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Results are read-only."""
        return False

    @admin.display(description=_("input"))
    def short_input(self, obj: Any) -> str:
        """The user message, shortened."""
        return _short(obj.input)

    @admin.display(description=_("reply"))
    def short_reply(self, obj: Any) -> str:
        """The reply (or the error), shortened."""
        return _short(obj.reply or obj.error)

    @admin.display(description=_("cost"))
    def cost_display(self, obj: Any) -> str:
        """The cost in USD."""
        return format_cost(obj.cost)


class RunStepInline(admin.TabularInline):  # type: ignore[type-arg]
    """A result's checkpointed steps (LLM calls and tool calls), read-only, in order."""

    model = RunStep
    fields = ("idx", "kind", "short_output", "fingerprint", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = _("steps (checkpointed LLM and tool calls)")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Steps are written by runs, never by hand."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Steps are read-only."""
        return False

    @admin.display(description=_("output"))
    def short_output(self, obj: Any) -> str:
        """The reply text or tool calls of an LLM step, the result of a tool step, shortened."""
        output = obj.output or {}
        if "json" in output or "text" in output:
            return _short(output.get("json", output.get("text")), 120)
        calls = ", ".join(f"{call.get('name')}({call.get('arguments')})" for call in output.get("tool_calls") or [])
        return _short(" ".join(filter(None, [output.get("content"), calls])), 120)


class ThreadAdmin(_URLs, admin.ModelAdmin):  # type: ignore[type-arg]
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

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Threads are shown read-only; runs change them."""
        return False

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        """Re-running needs the model's *change* permission (it writes a new run)."""
        codename = get_permission_codename("change", self.opts)
        return bool(request.user.has_perm(f"{self.opts.app_label}.{codename}"))

    def get_search_fields(self, request: HttpRequest) -> tuple[str, ...]:
        """The search fields plus the owner's username field."""
        return (*self.search_fields, f"user__{get_user_model().USERNAME_FIELD}")

    def _result_model(self) -> Any:
        return self.model._meta.get_field("results").related_model

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
    def short_last_message(self, obj: Any) -> str:
        """The last user message, shortened."""
        return _short(obj.last_user_message)

    @admin.display(description=_("runs"), ordering="robotlab_runs")
    def run_count(self, obj: Any) -> int:
        """How many results the thread has."""
        return int(getattr(obj, "robotlab_runs", 0))

    @admin.display(description=_("tokens"), ordering="robotlab_tokens")
    def total_tokens(self, obj: Any) -> int:
        """Input plus output tokens over all runs."""
        return int(getattr(obj, "robotlab_tokens", 0))

    @admin.display(description=_("cost"), ordering="robotlab_cost")
    def total_cost(self, obj: Any) -> str:
        """Cost over all runs, in USD."""
        return format_cost(getattr(obj, "robotlab_cost", 0))

    @admin.display(description=_("input metadata"))
    def input_metadata_display(self, obj: Any) -> str:
        """``input_metadata``, pretty-printed."""
        return _json_block(obj.input_metadata)

    @admin.display(description=_("state data"))
    def state_data_display(self, obj: Any) -> str:
        """``state_data``, pretty-printed."""
        return _json_block(obj.state_data)

    @admin.display(description=_("usage"))
    def usage_summary(self, obj: Any) -> str:
        """Runs, tokens and cost of the thread."""
        return format_html("{} runs, {} input + {} output tokens, {}", self.run_count(obj),
                           *self._token_split(obj), self.total_cost(obj))

    def _token_split(self, obj: Any) -> tuple[int, int]:
        totals = obj.results.aggregate(i=Sum("input_tokens"), o=Sum("output_tokens"))
        return int(totals["i"] or 0), int(totals["o"] or 0)

    # -- actions -------------------------------------------------------------------------
    @admin.action(description=_("Re-run last user message"), permissions=["rerun"])
    def rerun_last_user_message(self, request: HttpRequest, queryset: Any) -> None:
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

    @admin.action(description=_("Export transcript as JSON"), permissions=["view"])
    def export_transcript(self, request: HttpRequest, queryset: Any) -> HttpResponse:
        """Download the selected threads and all their runs as one JSON file."""
        threads = list(queryset.select_related("user"))
        name = f"transcript-{_filename(threads[0].session_id)}" if len(threads) == 1 else "transcripts"
        response = HttpResponse(export_threads(threads), content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response

    # -- views ---------------------------------------------------------------------------
    def get_urls(self) -> list[Any]:
        """The change list URLs plus ``<id>/transcript/`` and ``<id>/transcript.json``."""
        return [
            path("<path:object_id>/transcript/", self.admin_site.admin_view(self.transcript_view),
                 name=_route(self.opts, "transcript")),
            path("<path:object_id>/transcript.json", self.admin_site.admin_view(self.transcript_json_view),
                 name=_route(self.opts, "transcript_json")),
            *super().get_urls(),
        ]

    def _viewable(self, request: HttpRequest, object_id: str) -> Any:
        thread = get_object_or_404(self.get_queryset(request), pk=object_id)
        if not self.has_view_permission(request, thread):
            raise PermissionDenied
        return thread

    def transcript_view(self, request: HttpRequest, object_id: str) -> TemplateResponse:
        """Every run of the thread in order: user turns, replies, tool calls and tool results."""
        thread = self._viewable(request, object_id)
        page = Paginator(thread.results.order_by("sequence_number"), TRANSCRIPT_PAGE_SIZE).get_page(
            request.GET.get("page"))
        context = {
            **self.admin_site.each_context(request),
            "title": _("Transcript of %(thread)s") % {"thread": thread.session_id},
            "opts": self.opts,
            "thread": thread,
            "page": page,
            "runs": transcript_runs(page.object_list),
            "change_url": self._url("change", thread.pk),
            "json_url": self._url("transcript_json", thread.pk),
            "result_admin_url": _result_change_url_name(self._result_model()),
        }
        return TemplateResponse(request, "robotlab/admin/transcript.html", context)

    def transcript_json_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The thread's transcript as a JSON download."""
        thread = self._viewable(request, object_id)
        response = HttpResponse(export_threads([thread]), content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="transcript-{_filename(thread.session_id)}.json"'
        return response

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> Any:
        """The change page, with links to the transcript and its JSON."""
        extra = {
            "robotlab_transcript_url": self._url("transcript", object_id),
            "robotlab_json_url": self._url("transcript_json", object_id),
            **(extra_context or {}),
        }
        return super().change_view(request, object_id, form_url, extra)


def _result_change_url_name(model: type[models.Model]) -> str:
    return f"admin:{model._meta.app_label}_{model._meta.model_name}_change"


class RobotResultAdmin(_URLs, admin.ModelAdmin):  # type: ignore[type-arg]
    """Robot results, read-only: filters, search, tokens and cost with totals, and a usage page."""

    list_display = ("__str__", "thread_link", status_and_question, "llm_model", "tokens_display",
                    "cost_display", "duration_display", "created_display")
    actions = (cancel_runs,)
    list_filter = (rollup_filter("robot_name", _("robot")), "status", rollup_filter("model", _("model")),
                   "created_at")
    paginator = CappedPaginator
    search_fields = ("thread__session_id", "input", "reply", "checksum", "run_id", "task_id")
    list_select_related = ("thread",)
    show_full_result_count = False
    ordering = ("-created_at", "-pk")
    fields = ("thread", "sequence_number", "robot_name", "status", "input", "reply", "transcript_display",
              "stop_reason", "checksum", "model", "input_tokens", "output_tokens", "cost_display",
              "duration_display", "question", "answers", "parked_at", "error_type", "error", "delegated_by",
              "run_id", "task_id", "attempts",
              "created_at", "started_at", "finished_at", "task_name", "worker", "worker_pid", "task_graph_display",
              "output_display", "tool_calls_display", "messages_display")
    readonly_fields = fields
    change_list_template = "robotlab/admin/result_change_list.html"
    change_form_template = "robotlab/admin/result_change_form.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Results are written by runs."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Results are read-only."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Results go with their thread (retention), never one by one."""
        return False

    @admin.display(description=_("thread"), ordering="thread__session_id")
    def thread_link(self, obj: Any) -> str:
        """The thread's session id, linking to the thread."""
        thread_opts = obj.thread._meta
        url = reverse(f"admin:{thread_opts.app_label}_{thread_opts.model_name}_change", args=[obj.thread_id],
                      current_app=self.admin_site.name)
        session = str(obj.thread.session_id)
        return format_html('<a href="{}" title="{}" class="robotlab-nowrap">{}</a>', url, session, session[:8])

    @admin.display(description=_("tokens in / out"), ordering="input_tokens")
    def tokens_display(self, obj: Any) -> str:
        """Input and output tokens, in one narrow column."""
        return f"{obj.input_tokens or 0} / {obj.output_tokens or 0}"

    @admin.display(description=_("created"), ordering="created_at")
    def created_display(self, obj: Any) -> str:
        """When the run was queued, in the site's time zone: ``2026-12-03 17:46``."""
        return date_format(timezone.localtime(obj.created_at), "Y-m-d H:i") if obj.created_at else ""

    @admin.display(description=_("model"), ordering="model")
    def llm_model(self, obj: Any) -> str:
        """The model that answered."""
        return str(obj.model)

    @admin.display(description=_("cost"), ordering="cost")
    def cost_display(self, obj: Any) -> str:
        """The cost in USD."""
        return format_cost(obj.cost)

    @admin.display(description=_("duration"), ordering="duration")
    def duration_display(self, obj: Any) -> str:
        """The run's wall time."""
        return "" if obj.duration is None else f"{obj.duration:.2f} s"

    @admin.display(description=_("output"))
    def output_display(self, obj: Any) -> str:
        """``output_data``, pretty-printed."""
        return _json_block(obj.output_data)

    @admin.display(description=_("tool calls"))
    def tool_calls_display(self, obj: Any) -> str:
        """``tool_calls_data``, pretty-printed."""
        return _json_block(obj.tool_calls_data)

    @admin.display(description=_("messages"))
    def messages_display(self, obj: Any) -> str:
        """The chat messages the run appended, pretty-printed."""
        return _json_block(obj.messages)

    @admin.display(description=_("task graph"))
    def task_graph_display(self, obj: Any) -> str:
        """A network turn's tasks as a picture, coloured by status (see :mod:`robotlab_django.turn_graph`)."""
        return turn_graph(obj)

    @admin.display(description=_("transcript"))
    def transcript_display(self, obj: Any) -> str:
        """The run as a transcript: the user turn, replies, tool calls and tool results."""
        from django.template.loader import render_to_string

        return render_to_string("robotlab/admin/run_items.html", {"items": run_items(obj)})

    # -- totals and usage ----------------------------------------------------------------
    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        """The change list, with token and cost totals of the filtered results."""
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context is not None and "cl" in context:
            totals = list_totals(context["cl"])
            if totals is not None:
                totals["cost"] = format_cost(totals["cost"])
            context["robotlab_totals"] = totals
            context["robotlab_totals_capped"] = totals is None
            context["robotlab_usage_url"] = self._url("usage")
        return response

    def get_urls(self) -> list[Any]:
        """The change list URLs plus ``usage/``."""
        return [path("usage/", self.admin_site.admin_view(self.usage_view), name=_route(self.opts, "usage")),
                *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> TemplateResponse:
        """Tokens and cost per day by robot and model, as server-rendered SVG bar charts."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        default = app_settings.ADMIN_USAGE_DAYS
        try:
            days = int(request.GET.get("days", default))
        except (TypeError, ValueError):
            days = default
        days = days if 1 <= days <= 366 else default
        queryset = rollup_model()._default_manager.all()
        robot = request.GET.get("robot_name") or ""
        if robot:
            queryset = queryset.filter(robot_name=robot)
        context = {
            **self.admin_site.each_context(request),
            "title": _("Robot usage"),
            "opts": self.opts,
            "report": daily_usage(queryset, days=days),
            "days": days,
            "day_choices": (7, 30, 90, 365),
            "robot_name": robot,
            "changelist_url": self._url("changelist"),
            "today_spend": today_spend(),
        }
        return TemplateResponse(request, "robotlab/admin/usage.html", context)


def register_models(thread_model: type[models.Model], result_model: type[models.Model],
                    site: admin.AdminSite | None = None, *, step_model: type[models.Model] | None = None) -> None:
    """Register :class:`ThreadAdmin` and :class:`RobotResultAdmin` for a project's own models.

    ``result_model`` must have ``thread = ForeignKey(thread_model, related_name="results")``
    (the models ``robotlab_install --models`` writes do). A ``step_model`` (with
    ``result = ForeignKey(result_model)``) is shown inline on each result (:class:`RunStepInline`).
    """
    site = site or admin.site
    inline = type(f"{result_model.__name__}Inline", (RobotResultInline,), {"model": result_model})
    thread_admin = type(f"{thread_model.__name__}Admin", (ThreadAdmin,), {"inlines": (inline,)})
    site.register(thread_model, thread_admin)
    steps = () if step_model is None else (type(f"{step_model.__name__}Inline", (RunStepInline,),
                                                {"model": step_model}),)
    site.register(result_model, type(f"{result_model.__name__}Admin", (RobotResultAdmin,), {"inlines": steps}))


register_models(Thread, RobotResult, step_model=RunStep)

from . import token_admin  # noqa: E402,F401  (registers the API token admin)
