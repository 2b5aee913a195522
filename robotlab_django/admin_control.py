"""The admin's part in steering runs: the pending question of a parked run, and the staff cancel action.

:class:`robotlab_django.admin.RobotResultAdmin` lists these (filter by status ``awaiting an answer`` to
see the parked runs); the work is :mod:`robotlab_django.run_control`'s.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from . import run_control

__all__ = ["cancel_runs", "pending_question", "status_and_question"]


@admin.display(description=_("pending question"))
def pending_question(obj: Any) -> str:
    """The question an awaiting run waits on, with its choices (plain text: the admin escapes it)."""
    question = obj.question or {}
    text = str(question.get("question") or "")
    choices = question.get("choices") or []
    return f"{text} [{' / '.join(str(choice) for choice in choices)}]" if text and choices else text


@admin.display(description=_("status"), ordering="status")
def status_and_question(obj: Any) -> str:
    """The run's status; for an awaiting run, the question it waits on too (one column keeps lists narrow)."""
    question = pending_question(obj)
    return f"{obj.get_status_display()}: {question}" if question and obj.status == "awaiting" else obj.status


@admin.action(description=_("Cancel the selected runs"), permissions=["view"])
def cancel_runs(modeladmin: Any, request: HttpRequest, queryset: Any) -> None:
    """Cancel every selected run that is queued, running or awaiting (staff only); report the rest."""
    cancelled, skipped = 0, []
    for row in queryset:
        try:
            run_control.cancel(row, request.user, staff=True)
            cancelled += 1
        except run_control.RunControlError as exc:
            skipped.append(str(exc))
    modeladmin.message_user(request, _("Cancelled %(count)d run(s).") % {"count": cancelled}, messages.SUCCESS)
    for reason in skipped:
        modeladmin.message_user(request, reason, messages.WARNING)
