"""The admin of robot results, read-only: filters, search, token and cost columns, and each run's detail.

Filtered by robot, status, model and date, searchable, with token and cost columns, the totals of the filtered
list and a usage page (:mod:`~robotlab_django.admin.usage`), the staff cancel action
(:mod:`~robotlab_django.admin.control`), and on each result its transcript, its network turn's task graph and its
checkpointed steps inline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from robotlab_django.admin.control import cancel_runs, has_cancel_permission, status_and_question
from robotlab_django.admin.display import json_block
from robotlab_django.admin.evals import add_to_eval_set_link
from robotlab_django.admin.lists import CappedPaginator, rollup_filter
from robotlab_django.admin.traces import run_trace
from robotlab_django.admin.usage import UsageAdmin
from robotlab_django.networks.graph import turn_graph
from robotlab_django.runs.transcript import run_items
from robotlab_django.templatetags.robotlab_format import format_cost

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["RobotResultAdmin"]


class RobotResultAdmin(UsageAdmin):
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
              "duration_display", "question", "answers", "parked_at", "error_type", "error_kind", "error",
              "delegated_by", "run_id", "task_id", "attempts", "version", "code_hash", "eval_link",
              "created_at", "started_at", "finished_at", "task_name", "worker", "worker_pid", "task_graph_display",
              "trace_display", "output_display", "tool_calls_display", "messages_display")
    readonly_fields = fields
    change_list_template = "robotlab/admin/result_change_list.html"
    change_form_template = "robotlab/admin/result_change_form.html"

    eval_link = add_to_eval_set_link

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Results are written by runs."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: RobotResult | None = None) -> bool:
        """Results are read-only."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: RobotResult | None = None) -> bool:
        """Results go with their thread (retention), never one by one."""
        return False

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        """Cancelling runs needs the result model's *change* permission (not *view*)."""
        return has_cancel_permission(self, request)

    @admin.display(description=_("thread"), ordering="thread__session_id")
    def thread_link(self, obj: RobotResult) -> str:
        """The thread's session id, linking to the thread."""
        thread_opts = obj.thread._meta
        url = reverse(f"admin:{thread_opts.app_label}_{thread_opts.model_name}_change", args=[obj.thread_id],
                      current_app=self.admin_site.name)
        session = str(obj.thread.session_id)
        return format_html('<a href="{}" title="{}" class="robotlab-nowrap">{}</a>', url, session, session[:8])

    @admin.display(description=_("tokens in / out"), ordering="input_tokens")
    def tokens_display(self, obj: RobotResult) -> str:
        """Input and output tokens, in one narrow column."""
        return f"{obj.input_tokens or 0} / {obj.output_tokens or 0}"

    @admin.display(description=_("created"), ordering="created_at")
    def created_display(self, obj: RobotResult) -> str:
        """When the run was queued, in the site's time zone: ``2026-12-03 17:46``."""
        return date_format(timezone.localtime(obj.created_at), "Y-m-d H:i") if obj.created_at else ""

    @admin.display(description=_("model"), ordering="model")
    def llm_model(self, obj: RobotResult) -> str:
        """The model that answered."""
        return str(obj.model)

    @admin.display(description=_("cost"), ordering="cost")
    def cost_display(self, obj: RobotResult) -> str:
        """The cost in USD."""
        return format_cost(obj.cost)

    @admin.display(description=_("duration"), ordering="duration")
    def duration_display(self, obj: RobotResult) -> str:
        """The run's wall time."""
        return "" if obj.duration is None else f"{obj.duration:.2f} s"

    @admin.display(description=_("output"))
    def output_display(self, obj: RobotResult) -> str:
        """``output_data``, pretty-printed."""
        return json_block(obj.output_data)

    @admin.display(description=_("tool calls"))
    def tool_calls_display(self, obj: RobotResult) -> str:
        """``tool_calls_data``, pretty-printed."""
        return json_block(obj.tool_calls_data)

    @admin.display(description=_("messages"))
    def messages_display(self, obj: RobotResult) -> str:
        """The chat messages the run appended, pretty-printed."""
        return json_block(obj.messages)

    @admin.display(description=_("task graph"))
    def task_graph_display(self, obj: RobotResult) -> str:
        """A network turn's tasks as a picture, coloured by status (see :mod:`robotlab_django.networks.graph`)."""
        return turn_graph(obj)

    @admin.display(description=_("transcript"))
    def transcript_display(self, obj: RobotResult) -> str:
        """The run as a transcript: the user turn, replies, tool calls and tool results."""
        return render_to_string("robotlab/admin/run_items.html", {"items": run_items(obj), "anchor": obj.pk})

    @admin.display(description=_("trace"))
    def trace_display(self, obj: RobotResult) -> str:
        """The run's spans as a waterfall (a network turn's: its tasks' too), each bar linking to its transcript line.

        See :mod:`robotlab_django.admin.traces`; every label in the picture is escaped.
        """
        trace = run_trace(obj, lambda pk: self._url("change", pk))
        turn_url = self._url("change", obj.parent_id) if getattr(obj, "parent_id", None) else None
        return render_to_string("robotlab/admin/_trace.html", {"trace": trace, "svg": trace.svg(),
                                                               "turn_url": turn_url})
