"""The admin's part in steering runs: the pending question of a parked run, and the staff cancel action.

:class:`robotlab_django.admin.RobotResultAdmin` lists these (filter by status ``awaiting an answer`` to
see the parked runs); the work is :mod:`robotlab_django.runs.control`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from robotlab_django.runs import control

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from robotlab_django.models import RobotResult

__all__ = ["cancel_runs", "has_cancel_permission", "pending_question", "status_and_question"]


def has_cancel_permission(modeladmin: admin.ModelAdmin[Any], request: HttpRequest) -> bool:
    """Whether ``request.user`` may cancel runs: the result model's *change* permission (``change_robotresult``).

    *view* is not enough: cancelling stops someone else's work. The admin shows results read-only, so its
    ``has_change_permission`` is always false; this asks the user's permission itself.
    """
    opts = modeladmin.opts
    return bool(request.user.has_perm(f"{opts.app_label}.{get_permission_codename('change', opts)}"))


@admin.display(description=_("pending question"))
def pending_question(obj: RobotResult) -> str:
    """The question an awaiting run waits on, with its choices (plain text: the admin escapes it)."""
    question = obj.question or {}
    text = str(question.get("question") or "")
    choices = question.get("choices") or []
    return f"{text} [{' / '.join(str(choice) for choice in choices)}]" if text and choices else text


@admin.display(description=_("status"), ordering="status")
def status_and_question(obj: RobotResult) -> str:
    """The run's status; for an awaiting run, the question it waits on too (one column keeps lists narrow)."""
    question = pending_question(obj)
    return f"{obj.get_status_display()}: {question}" if question and obj.status == "awaiting" else obj.status


@admin.action(description=_("Cancel the selected runs"), permissions=["cancel"])
def cancel_runs(modeladmin: admin.ModelAdmin[Any], request: HttpRequest, queryset: QuerySet[RobotResult]) -> None:
    """Cancel every selected run that is queued, running or awaiting; report the rest.

    Offered only to staff for whom the model admin's ``has_cancel_permission`` holds (the result model's
    *change* permission, see :func:`has_cancel_permission`): Django drops the action, from the menu and
    from a posted form, for anyone else.
    """
    cancelled, skipped = 0, []
    for row in queryset:
        try:
            control.cancel(row, request.user, staff=True)
            cancelled += 1
        except control.RunControlError as exc:
            skipped.append(str(exc))
    modeladmin.message_user(request, _("Cancelled %(count)d run(s).") % {"count": cancelled}, messages.SUCCESS)
    for reason in skipped:
        modeladmin.message_user(request, reason, messages.WARNING)
