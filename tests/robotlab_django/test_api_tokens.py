"""API tokens: the command prints one, only its digest is stored, the admin revokes it, and the ACP
endpoints take nothing else (no token, a bad or revoked one, a session cookie: 401)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from robotlab_django.api_tokens import digest
from robotlab_django.models import ApiToken

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
