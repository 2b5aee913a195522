"""The results' totals and usage charts in the admin: tokens and cost of the filtered list, and per day.

:class:`UsageAdmin` is the base of :class:`~robotlab_django.admin.results.RobotResultAdmin`: its change list shows
the token and cost totals of the filtered results (:func:`~robotlab_django.admin.lists.list_totals`), and its
``usage/`` page charts tokens and cost per day by robot and model from the daily rollups, with today's spend per
user and the rolling online score per robot version (:mod:`robotlab_django.evals.rolling`).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _

from robotlab_django.accounting.rollups import rollup_model
from robotlab_django.accounting.usage import daily_usage
from robotlab_django.admin.display import AdminURLs, route_name
from robotlab_django.admin.lists import list_totals, today_spend
from robotlab_django.conf import app_settings
from robotlab_django.evals.rolling import rolling_scores
from robotlab_django.templatetags.robotlab_format import format_cost

__all__ = ["UsageAdmin"]


class UsageAdmin(AdminURLs, admin.ModelAdmin):  # type: ignore[type-arg]
    """A result model admin's list totals and its usage page."""

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
        return [path("usage/", self.admin_site.admin_view(self.usage_view), name=route_name(self.opts, "usage")),
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
            "online": rolling_scores(days=days, robot_name=robot),
        }
        return TemplateResponse(request, "robotlab/admin/usage.html", context)
