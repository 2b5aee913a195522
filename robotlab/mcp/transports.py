"""What the MCP SDK's ``mcp.Client`` connects to, built from a :class:`ServerConfig`.

stdio servers become ``StdioServerParameters`` (the server inherits this process's environment
plus the configured ``env``); streamable HTTP and SSE become the SDK's transport context
managers, with the configured headers and ``auth_provider``; an in-process server is passed
through. A target is built anew for every connection.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from ..errors import MCPError
from .server_config import IN_PROCESS, ServerConfig

__all__ = ["sdk_target"]


def _auth(provider: Callable[[], Any] | None) -> Any:
    if provider is None:
        return None
    import httpx2

    get_header = provider

    class ProviderAuth(httpx2.Auth):
        """Sets ``Authorization`` from the configured ``auth_provider`` on every request."""

        def auth_flow(self, request: Any) -> Generator[Any, Any, None]:
            value = get_header()
            if value:
                request.headers["Authorization"] = str(value)
            yield request

    return ProviderAuth()


@contextlib.asynccontextmanager
async def _streamable_http(url: str, headers: dict[str, str] | None, auth: Any) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=headers, auth=auth) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def sdk_target(config: ServerConfig) -> Any:
    """What ``mcp.Client`` connects to for ``config`` (built anew for every connection).

    Raises:
        MCPError: the transport type has no SDK client.
    """
    transport = config.transport
    kind = config.transport_type
    if kind == IN_PROCESS:
        return transport["server"]
    if kind == "stdio":
        from mcp import StdioServerParameters

        env = {**os.environ, **{str(k): str(v) for k, v in (transport.get("env") or {}).items()}}
        return StdioServerParameters(
            command=str(transport["command"]),
            args=[str(a) for a in transport.get("args") or []],
            env=env,
            cwd=transport.get("cwd"),
        )
    headers = {str(k): str(v) for k, v in (transport.get("headers") or {}).items()} or None
    auth = _auth(transport.get("auth_provider"))
    if kind in ("streamable-http", "http"):
        return _streamable_http(str(transport["url"]), headers, auth)
    if kind == "sse":
        from mcp.client.sse import sse_client

        return sse_client(str(transport["url"]), headers=headers, auth=auth, timeout=config.timeout)
    raise MCPError(
        f"Unsupported transport type: {kind} (the MCP SDK has no client for it; use streamable-http)"
    )
