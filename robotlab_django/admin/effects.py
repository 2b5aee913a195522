"""The admin's journal of tools' side effects: every journaled call, and the actions that resolve an unknown one.

:class:`ToolEffectAdmin` lists the :class:`~robotlab_django.models.ToolEffect` rows (read-only: the journal is what
happened), filtered by status, robot, tool and user, and searchable by run id and key. A call whose outcome is
unknown (its worker died inside the tool; its run waits) is resolved by one of two actions, offered to staff who
may resolve effects (:func:`robotlab_django.runs.effect_control.may_resolve`):

* *Mark done with a result*: a page asks for the result the model reads, then marks the selected effects done;
* *Retry*: the tools run again.

Each queues the effect's parked run again. Arguments and results are model output: they are shown as escaped
text, never marked safe.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html
from django.utils.text import Truncator
from django.utils.translation import gettext_lazy as _

from robotlab_django import swappable
from robotlab_django.models import ToolEffect
from robotlab_django.runs import effect_control
from robotlab_django.runs.checkpoints import stored_tool_result

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.db.models import QuerySet
    from django.utils.functional import _StrPromise

__all__ = ["ToolEffectAdmin", "mark_effects_done", "retry_effects"]

#: Characters of the arguments and the result shown in the list.
LIST_TEXT = 80


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _resolve_each(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[ToolEffect],
                  resolve: Callable[[ToolEffect], object], done: str | _StrPromise) -> None:
    resolved, skipped = 0, []
    for effect in queryset:
        try:
            resolve(effect)
            resolved += 1
        except effect_control.EffectResolutionError as exc:
            skipped.append(str(exc))
    modeladmin.message_user(request, done % {"count": resolved}, messages.SUCCESS)
    for reason in skipped:
        modeladmin.message_user(request, reason, messages.WARNING)


@admin.action(description=_("Retry the selected effects' tools (their runs go on)"), permissions=["resolve"])
def retry_effects(modeladmin: admin.ModelAdmin[Any], request: HttpRequest,
                  queryset: QuerySet[ToolEffect]) -> None:
    """Have the tools of the selected unknown effects run again; their runs are queued again."""
    _resolve_each(modeladmin, request, queryset, lambda effect: effect_control.retry(effect, request.user),
                  _("%(count)d effect(s) will be retried."))


@admin.action(description=_("Mark the selected effects done with a result (their runs go on)"),
              permissions=["resolve"])
def mark_effects_done(modeladmin: admin.ModelAdmin[Any], request: HttpRequest,
                      queryset: QuerySet[ToolEffect]) -> TemplateResponse | None:
    """Ask for the result the model reads, then mark the selected unknown effects done with it."""
    if request.POST.get("post") == "yes":
        result = request.POST.get("result", "")
        _resolve_each(modeladmin, request, queryset,
                      lambda effect: effect_control.mark_done(effect, result, request.user),
                      _("%(count)d effect(s) marked done."))
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": _("Mark effects done"),
        "opts": modeladmin.opts,
        "effects": list(queryset),
        "action": request.POST.get("action", ""),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "robotlab/admin/effect_done.html", context)


@admin.register(ToolEffect)
class ToolEffectAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Tool effects: read-only, filtered by status, robot, tool and user, with the resolve actions."""

    list_display = ("created_at", "robot_name", "tool_name", "user", "status", "attempts", "run", "short_arguments",
                    "short_result")
    list_filter = ("status", "robot_name", "tool_name", ("user", admin.RelatedOnlyFieldListFilter))
    search_fields = ("run_id", "key", "call_id")
    list_select_related = ("user",)
    date_hierarchy = "created_at"
    actions = (mark_effects_done, retry_effects)
    readonly_fields = ("key", "run", "run_id", "step", "call_id", "robot_name", "tool_name", "user", "status",
                       "arguments_json", "result_text", "error", "atomic", "attempts", "created_at", "finished_at",
                       "resolved_by", "resolved_at")
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Effects are journaled by runs, not added."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: ToolEffect | None = None) -> bool:
        """The journal is read-only; resolving goes through the actions."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ToolEffect | None = None) -> bool:
        """Never: a deleted effect would let a retried run repeat it."""
        return False

    def has_resolve_permission(self, request: HttpRequest) -> bool:
        """Whether ``request.user`` may resolve effects (:func:`~robotlab_django.runs.effect_control.may_resolve`)."""
        return effect_control.may_resolve(request.user)

    @admin.display(description=_("run"))
    def run(self, obj: ToolEffect) -> str:
        """The run's id, linked to its result's page when the admin has one."""
        opts = swappable.result_model()._meta
        try:
            url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.result_pk])
        except NoReverseMatch:
            return obj.run_id
        return format_html('<a href="{}">{}</a>', url, obj.run_id)

    @admin.display(description=_("arguments"))
    def short_arguments(self, obj: ToolEffect) -> str:
        """The arguments, shortened."""
        return Truncator(_text(obj.arguments)).chars(LIST_TEXT)

    @admin.display(description=_("result"))
    def short_result(self, obj: ToolEffect) -> str:
        """What the model read, shortened."""
        return Truncator(self.result_text(obj)).chars(LIST_TEXT)

    @admin.display(description=_("arguments"))
    def arguments_json(self, obj: ToolEffect) -> str:
        """The arguments as indented JSON."""
        return json.dumps(obj.arguments, ensure_ascii=False, indent=2, default=str)

    @admin.display(description=_("result"))
    def result_text(self, obj: ToolEffect) -> str:
        """What the model read (empty while the call has no result)."""
        return _text(stored_tool_result(obj.result)) if obj.result else ""
