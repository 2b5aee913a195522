"""The admin of API tokens.

List them (prefix, owner, last use), revoke them; new ones come from ``manage.py robotlab_token`` so the plain token
is shown only once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _

from robotlab_django.models import ApiToken
from robotlab_django.protocols.tokens import revoke

if TYPE_CHECKING:
    from django.db.models import QuerySet

__all__ = ["ApiTokenAdmin"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Lists tokens and revokes them (the revoke action, or delete)."""

    list_display = ("prefix", "name", "user", "created_at", "last_used_at", "expires_at", "revoked_at")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("prefix", "name", "user__username")
    readonly_fields = ("user", "prefix", "digest", "created_at", "last_used_at", "expires_at", "revoked_at")
    fields = ("name", *readonly_fields)
    actions = ("revoke_tokens",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        """Tokens are issued by ``manage.py robotlab_token``, which shows the plain token once."""
        return False

    @admin.action(description=_("Revoke the selected tokens"))
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        """Revoke every selected token that is still active."""
        rows = list(queryset.filter(revoked_at__isnull=True))
        for row in rows:
            revoke(row)
        self.message_user(request, _("Revoked %d token(s).") % len(rows), messages.SUCCESS)
