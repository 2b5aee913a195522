"""API tokens: the command prints one, only its digest is stored, the admin revokes it, and the ACP
endpoints take nothing else (no token, a bad or revoked one, a session cookie: 401)."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from robotlab_django.models import ApiToken
from robotlab_django.protocols.tokens import digest

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada(settings: Any) -> Any:
    settings.ROOT_URLCONF = "tests.robotlab_django.acp_urls"
    return get_user_model().objects.create_user("ada", password="pw")


def _token(username: str = "ada") -> str:
    out = io.StringIO()
    call_command("robotlab_token", username, "--name", "laptop", stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def test_the_command_prints_a_token_stored_only_as_its_digest(ada: Any) -> None:
    token = _token()
    row = ApiToken.objects.get()
    assert row.user == ada and row.name == "laptop" and token.startswith(row.prefix)
    assert row.digest == digest(token) and token not in (row.digest, row.prefix)
    assert _token() != token


def test_an_unknown_user_is_a_clear_error(ada: Any) -> None:
    with pytest.raises(CommandError, match="No user 'nobody'"):
        _token("nobody")


def test_only_a_valid_unrevoked_bearer_token_authenticates(ada: Any) -> None:
    token = _token()
    client = Client()
    assert client.get("/acp/agents", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    assert ApiToken.objects.get().last_used_at is not None
    for header in ({}, {"HTTP_AUTHORIZATION": "Bearer rl_wrong"}, {"HTTP_AUTHORIZATION": f"Token {token}"}):
        response = client.get("/acp/agents", **header)
        assert response.status_code == 401 and response.json()["code"] == "unauthorized"
    client.force_login(ada)  # a session cookie does not authenticate here
    assert client.get("/acp/agents").status_code == 401


def test_a_post_with_a_token_needs_no_csrf_token(ada: Any) -> None:
    token = _token()
    client = Client(enforce_csrf_checks=True)
    response = client.post("/acp/runs", data={"agent_name": "no-such-robot", "input": [{"parts": [
        {"content": "hi"}]}]}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_the_admin_lists_and_revokes_tokens(ada: Any) -> None:
    token = _token()
    root = get_user_model().objects.create_superuser("root", password="pw")
    admin = Client()
    admin.force_login(root)
    url = reverse("admin:robotlab_apitoken_changelist")
    assert ApiToken.objects.get().prefix in admin.get(url).text
    row = ApiToken.objects.get()
    admin.post(url, {"action": "revoke_tokens", "_selected_action": [str(row.pk)]})
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert Client().get("/acp/agents", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401


def _authenticates(token: str) -> bool:
    status = Client().get("/acp/agents", HTTP_AUTHORIZATION=f"Bearer {token}").status_code
    assert status in (200, 401)
    return status == 200


def test_a_token_expires_after_the_configured_days(ada: Any, settings: Any) -> None:
    token = _token()
    row = ApiToken.objects.get()
    assert row.expires_at is not None
    assert timedelta(days=89, hours=23) < row.expires_at - row.created_at <= timedelta(days=90, minutes=1)
    assert _authenticates(token)
    ApiToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert not _authenticates(token)  # expired: 401, as revoked
    settings.ROBOTLAB = {**settings.ROBOTLAB, "API_TOKEN_DAYS": 7}
    _token()
    week = ApiToken.objects.latest("pk")
    assert timedelta(days=6, hours=23) < week.expires_at - week.created_at <= timedelta(days=7, minutes=1)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "API_TOKEN_DAYS": None}
    forever = _token()
    assert ApiToken.objects.latest("pk").expires_at is None and _authenticates(forever)


def test_the_command_sets_a_tokens_days_and_says_when_it_expires(ada: Any) -> None:
    out = io.StringIO()
    call_command("robotlab_token", "ada", "--days", "2", stdout=out)
    row = ApiToken.objects.get()
    assert timedelta(days=1, hours=23) < row.expires_at - row.created_at <= timedelta(days=2, minutes=1)
    assert f"expires {row.expires_at:%Y-%m-%d %H:%M} UTC" in out.getvalue()
    with pytest.raises(CommandError, match="--days must be at least 1"):
        call_command("robotlab_token", "ada", "--days", "0", stdout=io.StringIO())


def test_a_password_change_revokes_the_users_tokens(ada: Any, settings: Any) -> None:
    token = _token()
    bob = get_user_model().objects.create_user("bob", password="pw")
    bobs = _token("bob")
    ada.last_login = timezone.now()
    ada.save()  # saving the user without a new password keeps the token
    assert _authenticates(token)
    settings.PASSWORD_HASHERS = [*settings.PASSWORD_HASHERS, "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    ada.password = make_password("pw", hasher="pbkdf2_sha256")
    ada.save()
    assert ada.check_password("pw") and ada.password.startswith("md5$")  # re-hashed at a login: no change
    assert _authenticates(token)
    ada.set_password("a new one")
    ada.save()
    assert not _authenticates(token)
    assert ApiToken.objects.get(user=ada).revoked_at is not None
    assert _authenticates(bobs) and bob.robotlab_api_tokens.get().revoked_at is None


def test_the_migration_gives_the_tokens_issued_before_expiries_existed_90_days(ada: Any) -> None:
    from importlib import import_module
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    migration = import_module("robotlab_django.migrations.0009_api_token_expiry")
    old, revoked = _token(), _token()
    ApiToken.objects.update(expires_at=None)
    ApiToken.objects.filter(digest=digest(revoked)).update(revoked_at=timezone.now())
    migration.expire_old_tokens(apps, SimpleNamespace(connection=connection))
    row = ApiToken.objects.get(digest=digest(old))
    assert timedelta(days=89, hours=23) < row.expires_at - timezone.now() <= timedelta(days=90)
    assert ApiToken.objects.get(digest=digest(revoked)).expires_at is None and _authenticates(old)
