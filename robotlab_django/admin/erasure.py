"""The admin's erase action: every row of the chosen users' content, after a page that counts it first.

:func:`erase_owners` is an action of the thread admin (it erases the owners of the selected
threads); :func:`erase_users` is the same for a user admin: add it to your ``UserAdmin.actions``.
Both show a confirmation page with the counts of a dry run (:func:`~robotlab_django.privacy.erasure.erasure_counts`)
and erase only when it is confirmed. They need the thread model's ``delete`` permission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.auth import get_permission_codename, get_user_model
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from robotlab_django import swappable
from robotlab_django.privacy.erasure import erase_user, erasure_counts

if TYPE_CHECKING:
    from django.contrib.auth.models import _User
    from django.db.models import QuerySet

    from robotlab_django.models import Thread

__all__ = ["erase_owners", "erase_users"]


def _may_erase(request: HttpRequest) -> bool:
    opts = swappable.thread_model()._meta
    return bool(request.user.has_perm(f"{opts.app_label}.{get_permission_codename('delete', opts)}"))


def _confirm_or_erase(modeladmin: admin.ModelAdmin[Any], request: HttpRequest,
                      queryset: QuerySet[Thread] | QuerySet[_User],
                      users: list[_User]) -> TemplateResponse | None:
    """The confirmation page (dry-run counts), or, once confirmed, the erasure."""
    if not _may_erase(request):
        modeladmin.message_user(request, _("Erasing needs the thread model's delete permission."), messages.ERROR)
        return None
    if request.POST.get("post") == "yes":
        for user in users:
            modeladmin.message_user(request, erase_user(user).describe(), messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": _("Erase users' content?"),
        "opts": modeladmin.opts,
        "reports": [erasure_counts(user) for user in users],
        "queryset": queryset,
        "action": request.POST.get("action", ""),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
    }
    return TemplateResponse(request, "robotlab/admin/erase_confirmation.html", context)


@admin.action(description=_("Erase all content of the selected threads' owners"))
def erase_owners(modeladmin: admin.ModelAdmin[Any], request: HttpRequest,
                 queryset: QuerySet[Thread]) -> TemplateResponse | None:
    """Erase every thread, result, event and step of the owners of the selected threads (after confirming)."""
    owner_ids = set(queryset.exclude(user__isnull=True).values_list("user_id", flat=True))
    users = list(get_user_model()._default_manager.filter(pk__in=owner_ids).order_by("pk"))
    if not users:
        modeladmin.message_user(request, _("The selected threads have no owner to erase."), messages.WARNING)
        return None
    return _confirm_or_erase(modeladmin, request, queryset, users)


@admin.action(description=_("Erase the selected users' RobotLab content"))
def erase_users(modeladmin: admin.ModelAdmin[Any], request: HttpRequest,
                queryset: QuerySet[_User]) -> TemplateResponse | None:
    """For a user admin: erase every thread, result, event and step of the selected users (after confirming)."""
    return _confirm_or_erase(modeladmin, request, queryset, list(queryset.order_by("pk")))
