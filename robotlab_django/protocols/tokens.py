"""API tokens for the protocol servers: issue one for a user, authenticate a ``Bearer`` request, revoke.

A token is ``rl_`` plus 40 random URL-safe characters; only its SHA-256 digest is stored
(:class:`~robotlab_django.models.ApiToken`), so a leaked database does not leak usable tokens. Requests
send ``Authorization: Bearer <token>``.

A token expires ``ROBOTLAB["API_TOKEN_DAYS"]`` days (90 by default) after it is issued, unless it is
issued for another number of days (``manage.py robotlab_token --days``). A user's tokens are revoked when
their password changes (the user model's ``set_password`` then ``save``: the admin's and the
``changepassword`` command's password forms, a password reset), as a password change ends their sessions;
a login that only re-hashes the password is no change.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.db.models.signals import post_save
from django.http import HttpRequest
from django.utils import timezone

from robotlab_django.conf import app_settings
from robotlab_django.models import ApiToken

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

__all__ = ["PREFIX", "TokenRequest", "authenticate", "bearer_token", "connect_signals", "digest", "issue_token",
           "revoke",
           "revoke_user_tokens"]

#: What every token starts with (lets secret scanners recognise one).
PREFIX = "rl_"


class TokenRequest(HttpRequest):
    """A request whose bearer token :func:`authenticate` accepted: its ``user`` is the token's active user."""

    user: _User


def digest(token: str) -> str:
    """The SHA-256 hex digest stored for ``token``."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def issue_token(user: _User, name: str = "", *, days: int | None = None) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the plain token (shown once, never stored).

    It expires after ``days`` days, by default ``ROBOTLAB["API_TOKEN_DAYS"]`` (``None`` there: never).
    """
    token = PREFIX + secrets.token_urlsafe(30)
    days = app_settings.API_TOKEN_DAYS if days is None else days
    expires_at = timezone.now() + timedelta(days=days) if days is not None else None
    row = ApiToken.objects.create(user=user, name=name, prefix=token[:10], digest=digest(token), expires_at=expires_at)
    return row, token


def revoke(row: ApiToken) -> None:
    """Revoke ``row``: requests with its token get 401 from now on."""
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])


def revoke_user_tokens(user_id: int) -> int:
    """Revoke every unrevoked token of user ``user_id``; returns how many."""
    return ApiToken.objects.filter(user_id=user_id, revoked_at__isnull=True).update(revoked_at=timezone.now())


def bearer_token(header: str) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value, or ``""``."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def authenticate(header: str) -> _User | None:
    """The active user whose unrevoked, unexpired token the ``Authorization`` header carries, or ``None``."""
    token = bearer_token(header)
    if not token:
        return None
    now = timezone.now()
    row = (ApiToken.objects.select_related("user")
           .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now), digest=digest(token), revoked_at__isnull=True)
           .first())
    if row is None or not row.user.is_active:
        return None
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user


def _on_user_saved(sender: object, instance: _User, created: bool = False, **kwargs: object) -> None:
    # Django's AbstractBaseUser.save() calls password_validation.password_changed() after this signal under
    # the same condition: set_password() was called (a re-hash at login clears it before saving).
    if not created and getattr(instance, "_password", None) is not None:
        revoke_user_tokens(instance.pk)


def connect_signals() -> None:
    """Connect the receiver that revokes a user's tokens when the user is saved with a new password."""
    post_save.connect(_on_user_saved, sender=get_user_model(), dispatch_uid="robotlab_revoke_tokens_on_password")
