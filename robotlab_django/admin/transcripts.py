"""A thread's transcript in the admin: a page of every run in order, its JSON download, and the export action.

:class:`TranscriptAdmin` is the base of :class:`~robotlab_django.admin.threads.ThreadAdmin`: it adds the URLs
``<id>/transcript/`` and ``<id>/transcript.json``, links to them from the thread's page, and the action that
exports the selected threads as one JSON file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.translation import gettext_lazy as _

from robotlab_django.admin.display import AdminURLs, file_name, route_name
from robotlab_django.runs.transcript import export_threads, transcript_runs

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from robotlab_django.models import Thread

__all__ = ["TRANSCRIPT_PAGE_SIZE", "TranscriptAdmin", "result_change_url_name"]

#: Runs per page of the transcript view.
TRANSCRIPT_PAGE_SIZE = 100


def result_change_url_name(model: type[models.Model]) -> str:
    """The URL name (with the ``admin:`` namespace) of a result's change page."""
    return f"admin:{model._meta.app_label}_{model._meta.model_name}_change"


class TranscriptAdmin(AdminURLs, admin.ModelAdmin):  # type: ignore[type-arg]
    """A thread model admin's transcript page, its JSON download and the export action."""

    def _result_model(self) -> Any:
        return self.model._meta.get_field("results").related_model

    @admin.action(description=_("Export transcript as JSON"), permissions=["view"])
    def export_transcript(self, request: HttpRequest, queryset: QuerySet[Thread]) -> HttpResponse:
        """Download the selected threads and all their runs as one JSON file."""
        threads = list(queryset.select_related("user"))
        name = f"transcript-{file_name(threads[0].session_id)}" if len(threads) == 1 else "transcripts"
        response = HttpResponse(export_threads(threads), content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response

    def get_urls(self) -> list[Any]:
        """The change list URLs plus ``<id>/transcript/`` and ``<id>/transcript.json``."""
        return [
            path("<path:object_id>/transcript/", self.admin_site.admin_view(self.transcript_view),
                 name=route_name(self.opts, "transcript")),
            path("<path:object_id>/transcript.json", self.admin_site.admin_view(self.transcript_json_view),
                 name=route_name(self.opts, "transcript_json")),
            *super().get_urls(),
        ]

    def _viewable(self, request: HttpRequest, object_id: str) -> Thread:
        thread: Thread = get_object_or_404(self.get_queryset(request), pk=object_id)
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
            "result_admin_url": result_change_url_name(self._result_model()),
        }
        return TemplateResponse(request, "robotlab/admin/transcript.html", context)

    def transcript_json_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The thread's transcript as a JSON download."""
        thread = self._viewable(request, object_id)
        response = HttpResponse(export_threads([thread]), content_type="application/json; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="transcript-{file_name(thread.session_id)}.json"'
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
