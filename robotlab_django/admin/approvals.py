"""The admin of tool calls waiting for approval: the list of :class:`~robotlab_django.models.ToolApproval`.

It lists the runs parked on a tool call (:mod:`robotlab_django.runs.approvals`): the robot, the tool, the run's
user, the arguments and the before/after of what the call changes, filterable by robot, tool and user. The
*Approve* and *Deny* actions decide the selected calls (:func:`robotlab_django.runs.control.decide`): they are
offered to staff with the ``robotlab.approve_toolcall`` permission, and each call is checked again as it is
decided. Staff see the list with that permission or the proxy's *view* permission. Every value the model wrote is
escaped (``format_html``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename, get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from robotlab_django.models import ToolApproval
from robotlab_django.runs import approvals, control

__all__ = ["RobotFilter", "ToolApprovalAdmin", "ToolFilter", "UserFilter"]


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "str" in value:
        return f"{value['str']} ({value.get('pk')})"
    return json.dumps(value, ensure_ascii=False, default=str)


class _WaitingFilter(admin.SimpleListFilter):
    """A filter whose choices are the values found among the waiting approvals."""

    lookup = ""

    def choices_of(self, rows: QuerySet[Any]) -> Iterable[tuple[str, str]]:
        """``(value, label)`` of each value among ``rows``."""
        values = rows.order_by().values_list(self.lookup, flat=True).distinct()
        return sorted((str(value), str(value)) for value in values if value not in (None, ""))

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Any]) -> Iterable[tuple[str, str]]:
        """The values of the waiting approvals."""
        return self.choices_of(approvals.waiting(model_admin.model._default_manager.all()))

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """The rows with the chosen value."""
        return queryset.filter(**{self.lookup: self.value()}) if self.value() else queryset


class RobotFilter(_WaitingFilter):
    """By robot."""

    title = _("robot")
    parameter_name = "robot"
    lookup = "robot_name"


class ToolFilter(_WaitingFilter):
    """By tool."""

    title = _("tool")
    parameter_name = "tool"
    lookup = "question__tool"


class UserFilter(_WaitingFilter):
    """By the run's user (its thread's owner)."""

    title = _("user")
    parameter_name = "user"
    lookup = "thread__user_id"

    def choices_of(self, rows: QuerySet[Any]) -> Iterable[tuple[str, str]]:
        """The users' names."""
        ids = {value for value in rows.order_by().values_list(self.lookup, flat=True).distinct() if value}
        users = get_user_model()._default_manager.filter(pk__in=ids)
        return sorted(((str(user.pk), str(user.get_username())) for user in users), key=lambda item: item[1])


@admin.register(ToolApproval)
class ToolApprovalAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The tool calls waiting for a person, oldest first, with the approve and deny actions."""

    list_display = ("run_link", "robot_name", "tool", "user", "call", "parked_at")
    list_filter = (RobotFilter, ToolFilter, UserFilter)
    list_select_related = ("thread", "thread__user")
    search_fields = ("run_id", "thread__user__username", "robot_name")
    ordering = ("parked_at", "pk")
    actions = ("approve_calls", "deny_calls")
    fields = ("run_link", "robot_name", "tool", "user", "call", "parked_at")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        """Only the runs parked on a tool call."""
        return approvals.waiting(super().get_queryset(request))

    def has_approve_permission(self, request: HttpRequest) -> bool:
        """Deciding needs ``robotlab.approve_toolcall`` (each call is checked again as it is decided)."""
        return bool(request.user.has_perm(approvals.PERMISSION))

    def has_view_permission(self, request: HttpRequest, obj: ToolApproval | None = None) -> bool:
        """The list is for staff who may decide, or who have the proxy's *view* permission."""
        opts = self.opts
        return bool(request.user.has_perm(f"{opts.app_label}.{get_permission_codename('view', opts)}")
                    or self.has_approve_permission(request))

    def has_module_permission(self, request: HttpRequest) -> bool:
        """Shown on the index to staff who may see the list."""
        return self.has_view_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Approvals are made by runs."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: ToolApproval | None = None) -> bool:
        """Read-only: the actions decide."""
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ToolApproval | None = None) -> bool:
        """A run is cancelled, not deleted (the results' admin cancels)."""
        return False

    @admin.display(description=_("run"), ordering="pk")
    def run_link(self, obj: ToolApproval) -> str:
        """The run, linking to its result."""
        url = reverse("admin:robotlab_robotresult_change", args=[obj.pk], current_app=self.admin_site.name)
        return format_html('<a href="{}">{}</a>', url, str(obj))

    @admin.display(description=_("tool"))
    def tool(self, obj: ToolApproval) -> str:
        """The tool to run."""
        return str((obj.question or {}).get("tool") or "")

    @admin.display(description=_("user"), ordering="thread__user__username")
    def user(self, obj: ToolApproval) -> str:
        """The run's user, who may decide too."""
        owner = getattr(obj.thread, "user", None)
        return "" if owner is None else str(owner.get_username())

    @admin.display(description=_("call"))
    def call(self, obj: ToolApproval) -> str:
        """The arguments, then each change as ``field: before → after`` (all escaped)."""
        question = obj.question or {}
        arguments = question.get("arguments") or {}
        changes = (question.get("details") or {}).get("changes") or []
        listed = format_html_join("", "<div><code>{}</code> = {}</div>",
                                  ((name, _text(value)) for name, value in arguments.items()))
        changed = format_html_join("", "<div><code>{}</code>: <del>{}</del> → <ins>{}</ins></div>",
                                   ((change.get("field"), _text(change.get("before")), _text(change.get("after")))
                                    for change in changes if isinstance(change, dict)))
        return format_html('<div class="robotlab-approval">{}{}</div>', listed, changed)

    def _decide(self, request: HttpRequest, queryset: QuerySet[ToolApproval], approved: bool) -> None:
        done, refused = 0, []
        for row in queryset:
            try:
                control.decide(row, approved, request.user, request_id=(row.question or {}).get("request_id"))
                done += 1
            except control.RunControlError as exc:
                refused.append(str(exc))
        verb = _("Approved %(count)d tool call(s).") if approved else _("Denied %(count)d tool call(s).")
        self.message_user(request, verb % {"count": done}, messages.SUCCESS)
        for reason in refused:
            self.message_user(request, reason, messages.WARNING)

    @admin.action(description=_("Approve the selected tool calls"), permissions=["approve"])
    def approve_calls(self, request: HttpRequest, queryset: QuerySet[ToolApproval]) -> None:
        """Run each selected call (its run goes on)."""
        self._decide(request, queryset, True)

    @admin.action(description=_("Deny the selected tool calls"), permissions=["approve"])
    def deny_calls(self, request: HttpRequest, queryset: QuerySet[ToolApproval]) -> None:
        """Deny each selected call: the model reads ``denied by <your user name>``."""
        self._decide(request, queryset, False)
