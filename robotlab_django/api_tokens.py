"""API tokens for the protocol servers: issue one for a user, authenticate a ``Bearer`` request, revoke.

A token is ``rl_`` plus 40 random URL-safe characters; only its SHA-256 digest is stored
(:class:`~robotlab_django.models.ApiToken`), so a leaked database does not leak usable tokens. Requests
send ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.utils import timezone

from .models import ApiToken

__all__ = ["PREFIX", "authenticate", "bearer_token", "digest", "issue_token", "revoke"]

#: What every token starts with (lets secret scanners recognise one).
PREFIX = "rl_"


def digest(token: str) -> str:
    """The SHA-256 hex digest stored for ``token``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the plain token (shown once, never stored)."""
    token = PREFIX + secrets.token_urlsafe(30)
    row = ApiToken.objects.create(user=user, name=name, prefix=token[:10], digest=digest(token))
    return row, token


def revoke(row: ApiToken) -> None:
    """Revoke ``row``: requests with its token get 401 from now on."""
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])


def bearer_token(header: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value, or ``""``."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def authenticate(header: str) -> Any:
    """The active user whose unrevoked token the ``Authorization`` header carries, or ``None``."""
    token = bearer_token(header)
    if not token:
        return None
    row = (ApiToken.objects.select_related("user")
           .filter(digest=digest(token), revoked_at__isnull=True).first())
    if row is None or not row.user.is_active:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
    return row.user
