"""The admin of online scores: the production runs its robots' online evals sampled, each with its score, read-only.

The scores come from :mod:`robotlab_django.evals.online` (``ROBOTLAB["ONLINE_EVALS"]``); the usage page charts their
rolling mean per version (:mod:`robotlab_django.evals.rolling`). A row links to its run.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from robotlab_django.models import OnlineScore

__all__ = ["OnlineScoreAdmin"]


@admin.register(OnlineScore)
class OnlineScoreAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Online scores by robot and version: read-only (the evaluators write them)."""

    list_display = ("__str__", "robot_name", "version", "score", "run_link", "cost", "created_at")
    list_filter = ("robot_name", "version")
    search_fields = ("run_id", "robot_name")
    fields = ("robot_name", "version", "code_hash", "run_link", "run_id", "score", "scores", "input_tokens",
              "output_tokens", "cost", "created_at")
    readonly_fields = fields
    list_select_related = ("version",)

    @admin.display(description=_("run"))
    def run_link(self, obj: OnlineScore) -> str:
        """A link to the scored run's page (when it is the app's own result model)."""
        if obj is None or obj.result_id is None:
            return "-"
        return format_html('<a href="{}">{}</a>', reverse("admin:robotlab_robotresult_change",
                                                          args=(obj.result_id,), current_app=self.admin_site.name),
                           obj.run_id)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Scores come from the online evals."""
        return False

    def has_change_permission(self, request: HttpRequest, obj: OnlineScore | None = None) -> bool:
        """A score is not edited."""
        return False
