"""The admin of robot versions and labels: create versions, compare two side by side, set current, roll back.

A version's change page shows its diff against the version before it; the "compare" action shows any two
selected versions side by side. Every cell is escaped by the template: a prompt is never trusted as HTML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Max
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from robotlab_django.models import RobotLabel, RobotVersion
from robotlab_django.registry import registry
from robotlab_django.versions.choice import rollback, set_current
from robotlab_django.versions.diff import diff_versions

if TYPE_CHECKING:
    from django.db.models import QuerySet

__all__ = ["RobotLabelAdmin", "RobotVersionAdmin", "RobotVersionForm"]


class RobotVersionForm(forms.ModelForm):  # type: ignore[type-arg]
    """A version of a registered robot; its tools must be the robot's own tools."""

    class Meta:
        model = RobotVersion
        fields = ("robot_name", "prompt", "model", "params", "tools", "token_budget", "cost_budget", "note")

    def clean_robot_name(self) -> str:
        """A registered robot's name."""
        name = str(self.cleaned_data["robot_name"])
        if name not in registry.names():
            raise forms.ValidationError(_("No robot is registered under this name."))
        return name

    def clean(self) -> dict[str, Any]:
        """The tools are a list of the robot's tool names; the params a mapping."""
        data: dict[str, Any] = super().clean() or {}
        if data.get("params") is not None and not isinstance(data["params"], dict):
            self.add_error("params", _("Give a JSON object of model parameters."))
        tools = data.get("tools")
        if tools is not None and data.get("robot_name"):
            if not isinstance(tools, list) or not all(isinstance(tool, str) for tool in tools):
                self.add_error("tools", _("Give a JSON list of tool names."))
            else:
                from robotlab_django.runs.runnables import build_robot

                known = {tool.name for tool in build_robot(data["robot_name"]).local_tools}
                unknown = sorted(set(tools) - known)
                if unknown:
                    self.add_error("tools", _("The robot has no tool %(names)s.") % {"names": ", ".join(unknown)})
        return data


def _diff_context(old: RobotVersion | None, new: RobotVersion) -> dict[str, Any]:
    rows = diff_versions(old, new)
    return {"diff": {str(_("prompt")): rows["prompt"], str(_("settings")): rows["settings"]},
            "old_title": str(old) if old else str(_("(nothing)")), "new_title": str(new)}


@admin.register(RobotVersion)
class RobotVersionAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Versions of robots: new ones numbered per robot, their diff, set current, compare, roll back."""

    form = RobotVersionForm
    list_display = ("__str__", "robot_name", "number", "is_current", "model", "note", "created_by", "created_at")
    list_filter = ("robot_name", "is_current")
    search_fields = ("robot_name", "note", "prompt")
    readonly_fields = ("number", "is_current", "made_current_at", "created_by", "created_at", "diff_display")
    actions = ("make_current", "roll_back", "compare")

    def get_fields(self, request: HttpRequest, obj: RobotVersion | None = None) -> Any:
        """The editable parts, then what the admin sets."""
        return [*RobotVersionForm.Meta.fields, *self.readonly_fields]

    def save_model(self, request: HttpRequest, obj: RobotVersion, form: forms.ModelForm[RobotVersion],
                   change: bool) -> None:
        """A new version takes the robot's next number and records who made it."""
        if not change:
            last = RobotVersion.objects.filter(robot_name=obj.robot_name).aggregate(top=Max("number"))["top"]
            obj.number = int(last or 0) + 1
            obj.created_by = request.user if request.user.is_authenticated else None
        super().save_model(request, obj, form, change)

    @admin.display(description=_("diff against the version before"))
    def diff_display(self, obj: RobotVersion | None) -> str:
        """The version against the one numbered before it, side by side."""
        if obj is None or obj.pk is None:
            return ""
        before = (RobotVersion.objects.filter(robot_name=obj.robot_name, number__lt=obj.number)
                  .order_by("-number").first())
        return SafeString(render_to_string("robotlab/admin/_version_diff.html", _diff_context(before, obj)))

    @admin.action(description=_("Make the selected version current"), permissions=["change"])
    def make_current(self, request: HttpRequest, queryset: QuerySet[RobotVersion]) -> None:
        """Make the one selected version its robot's current version."""
        chosen = list(queryset[:2])
        if len(chosen) != 1:
            self.message_user(request, _("Select exactly one version."), messages.WARNING)
            return
        set_current(chosen[0])
        self.message_user(request, _("%(version)s is current.") % {"version": chosen[0]}, messages.SUCCESS)

    @admin.action(description=_("Roll back the selected versions' robots"), permissions=["change"])
    def roll_back(self, request: HttpRequest, queryset: QuerySet[RobotVersion]) -> None:
        """Stop the robots' rollouts and make the version current before current again."""
        for name in sorted(set(queryset.values_list("robot_name", flat=True))):
            now = rollback(name)
            self.message_user(request, _("%(robot)s: rollouts stopped; current: %(version)s.")
                              % {"robot": name, "version": now or _("the code")}, messages.SUCCESS)

    @admin.action(description=_("Compare the two selected versions"), permissions=["view"])
    def compare(self, request: HttpRequest, queryset: QuerySet[RobotVersion]) -> TemplateResponse | None:
        """The two selected versions side by side, the older on the left."""
        chosen = sorted(queryset[:3], key=lambda version: (version.robot_name, version.number))
        if len(chosen) != 2:
            self.message_user(request, _("Select exactly two versions."), messages.WARNING)
            return None
        old, new = chosen
        context = {**self.admin_site.each_context(request), "title": _("Compare versions"),
                   **_diff_context(old, new)}
        return TemplateResponse(request, "robotlab/admin/version_diff.html", context)


@admin.register(RobotLabel)
class RobotLabelAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Labels of versions (``production``, ``canary``...) and their rollout percentages."""

    list_display = ("__str__", "robot_name", "name", "version", "rollout_percent", "updated_at")
    list_editable = ("rollout_percent",)
    list_filter = ("robot_name",)
    fields = ("robot_name", "name", "version", "rollout_percent")
    actions = ("stop_rollouts",)

    @admin.action(description=_("Stop the selected labels' rollouts"), permissions=["change"])
    def stop_rollouts(self, request: HttpRequest, queryset: QuerySet[RobotLabel]) -> None:
        """Set the rollouts to 0 %: new threads run the current version at once."""
        count = queryset.update(rollout_percent=0)
        self.message_user(request, _("%(count)d rollouts stopped.") % {"count": count}, messages.SUCCESS)
