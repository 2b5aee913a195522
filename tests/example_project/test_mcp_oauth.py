"""End-to-end: the example project's MCP endpoint under OAuth 2.1 (``ROBOTLAB_MCP_OAUTH=1``): its protected-resource
metadata, tokens issued by django-oauth-toolkit's token endpoint with robot scopes, the official ``mcp`` client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.example_project.test_example_project import _free_port, manage, served_project

pytest.importorskip("mcp.client")
pytest.importorskip("oauth2_provider")
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

CLIENT_ID, CLIENT_SECRET = "mcp-test-client", "mcp-test-secret-0123456789"

APPLICATION = f"""
from oauth2_provider.models import get_application_model
get_application_model().objects.create(name="MCP test client", client_id={CLIENT_ID!r}, client_secret={CLIENT_SECRET!r},
    client_type="confidential", authorization_grant_type="password")
"""


@dataclass
class Site:
    """The served example project with OAuth on: its base URL, its MCP endpoint's URL, a RobotLab API token."""

    url: str
    mcp: str
    api_token: str


@pytest.fixture(scope="module")
def oauth_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The example project with django-oauth-toolkit at /o/ and a confidential client that may use the password
    grant (the test's way to get tokens without a browser)."""
    tmp_path: Path = tmp_path_factory.mktemp("mcp_oauth")
    port = _free_port()
    env = {"ROBOTLAB_MCP_OAUTH": "1", "ROBOTLAB_MCP_URL": f"http://127.0.0.1:{port}/mcp/"}
    manage(tmp_path, "migrate", "--noinput", **env)
    manage(tmp_path, "demo_user", **env)
    manage(tmp_path, "shell", "-c", APPLICATION, **env)
    api_token = manage(tmp_path, "robotlab_token", "demo", **env).stdout.strip().splitlines()[-1]
    with served_project(tmp_path, port=port, **env) as url:
        yield Site(url, f"{url}/mcp/", api_token)


def _token(site: Site, scope: str) -> dict[str, Any]:
    """What django-oauth-toolkit's token endpoint answers to ``demo``'s password grant for ``scope``."""
    async def main() -> dict[str, Any]:
        async with httpx2.AsyncClient(timeout=30) as http:
            response = await http.post(f"{site.url}/o/token/", data={
                "grant_type": "password", "username": "demo", "password": "demo", "scope": scope},
                auth=(CLIENT_ID, CLIENT_SECRET))
            return {"status": response.status_code, **response.json()}
    return asyncio.run(main())


def _post(site: Site, token: str | None) -> httpx2.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream",
               **({"Authorization": f"Bearer {token}"} if token else {})}

    async def main() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.post(site.mcp, json=body, headers=headers)
    return asyncio.run(main())


def test_the_protected_resource_metadata_names_the_endpoint_and_its_scopes(oauth_site: Site) -> None:
    async def main() -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=30) as http:
            return await http.get(f"{oauth_site.url}/.well-known/oauth-protected-resource/mcp/")

    metadata = asyncio.run(main()).json()
    assert metadata["resource"] == oauth_site.mcp
    assert metadata["authorization_servers"] == [oauth_site.url + "/o"]  # django-oauth-toolkit's
    assert metadata["scopes_supported"] == ["mcp"]
    refused = _post(oauth_site, None)
    assert refused.status_code == 401
    assert "/.well-known/oauth-protected-resource/mcp/" in refused.headers["WWW-Authenticate"]


def test_a_missing_wrong_or_wrong_scope_token_is_refused(oauth_site: Site) -> None:
    no_endpoint_scope = _token(oauth_site, "robots")
    assert no_endpoint_scope["status"] == 200
    assert _token(oauth_site, "mcp robot:nobody")["error"] == "invalid_scope"  # the scopes are the robots'
    for token, status in ((None, 401), ("not-a-token", 401), (no_endpoint_scope["access_token"], 403)):
        response = _post(oauth_site, token)
        assert response.status_code == status, response.text
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "insufficient_scope" in _post(oauth_site, no_endpoint_scope["access_token"]).headers["WWW-Authenticate"]


def test_a_token_scoped_to_one_robot_reaches_only_that_robot(oauth_site: Site) -> None:
    granted = _token(oauth_site, "mcp robot:chat")
    assert granted["status"] == 200 and granted["scope"] == "mcp robot:chat"

    async def main(token: str) -> tuple[list[str], types.CallToolResult, str]:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http, \
                Client(streamable_http_client(oauth_site.mcp, http_client=http)) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            reply = await client.call_tool("chat", {"message": "Hello over OAuth"})
            with pytest.raises(MCPError) as refused:
                await client.call_tool("concierge", {"message": "Ask me something"})
            return names, reply, refused.value.error.message

    names, reply, refused = asyncio.run(main(granted["access_token"]))
    assert names == ["chat"]
    assert not reply.is_error and "Hello over OAuth" in reply.content[0].text  # type: ignore[union-attr]
    assert "No tool concierge for this token" in refused and "robot:concierge" in refused
    every, _, _ = asyncio.run(main(oauth_site.api_token))  # a RobotLab API token reaches every robot
    assert {"chat", "concierge", "orders", "support"} <= set(every)
