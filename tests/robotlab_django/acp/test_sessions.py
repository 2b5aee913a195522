"""ACP sessions as the official ``acp-sdk`` client reads them (issue 29, 3): ``GET /sessions/{id}`` answers the bare
``Session``, and an unknown, foreign or malformed session is a JSON error in ACP's form (never Django's HTML 404, which
the client cannot parse). In this process: ``httpx.ASGITransport`` in front of the app's ASGI application."""

from __future__ import annotations

import io
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections

from robotlab_django.asgi import get_robotlab_asgi_application

acp_client = pytest.importorskip("acp_sdk.client")
acp_models = pytest.importorskip("acp_sdk.models")

pytestmark = pytest.mark.django_db(transaction=True)
APP = get_robotlab_asgi_application()
BASE = "http://testserver/acp"


def _token(username: str) -> str:
    get_user_model().objects.create_user(username, password="pw")
    out = io.StringIO()
    call_command("robotlab_token", username, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture
async def tokens(settings: Any) -> AsyncIterator[tuple[str, str]]:
    """Tokens of ``ada`` and ``bob``; the URLconf serving ``/acp/``."""
    settings.ROOT_URLCONF = "tests.robotlab_django.acp_urls"
    yield await sync_to_async(_token)("ada"), await sync_to_async(_token)("bob")
    await sync_to_async(connections.close_all)()


def _client(token: str, session: Any = None) -> Any:
    return acp_client.Client(base_url=BASE, headers={"Authorization": f"Bearer {token}"}, session=session,
                             transport=httpx.ASGITransport(app=APP), timeout=10)


async def test_a_client_session_reads_its_session_and_an_unknown_one_is_not_found(
        tokens: tuple[str, str], settings: Any, scripted_llm: Any) -> None:
    scripted_llm("Hello Ada", "Still here")
    ada, bob = tokens
    async with _client(ada) as client, client.session() as session:
        with pytest.raises(acp_models.ACPError) as unknown:  # a new session: the server has none yet
            await session.refresh_session()
        assert unknown.value.error.code == "not_found"
        first = await session.run_sync("My name is Ada", agent="echo")
        await session.run_sync("Again", agent="echo")
        read = await session.refresh_session()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP)) as http:  # what load_history() fetches
        messages = [acp_models.Message.model_validate((await http.get(str(url))).json()) for url in read.history]
    history = [(message.role, str(message)) for message in messages]
    assert read.id == first.session_id
    assert history == [("user", "My name is Ada"), ("agent", "Hello Ada"), ("user", "Again"),
                       ("agent", "Still here")]
    async with _client(bob, session=read) as client:  # another user's session is none of bob's
        with pytest.raises(acp_models.ACPError) as foreign:
            await client.refresh_session()
    assert foreign.value.error.code == "not_found"


@pytest.mark.parametrize("path", ["/sessions/not-a-uuid", "/sessions/", "/sessions/a/b", "/session/not-a-uuid"])
async def test_a_malformed_session_path_is_a_json_not_found(tokens: tuple[str, str], path: str) -> None:
    ada, _bob = tokens
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=APP), base_url=BASE) as http:
        response = await http.get(BASE + path, headers={"Authorization": f"Bearer {ada}"})
        anonymous = await http.get(f"{BASE}/sessions/{uuid.uuid4()}")
    assert response.status_code == 404 and response.headers["content-type"] == "application/json"
    assert response.json()["code"] == "not_found"
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthorized"
