"""MCP in both directions: robots use MCP servers' tools, and robots are served as MCP servers.

Using servers: give a robot ``mcp_servers=[...]`` (or ``mcp=[...]``) configurations; it connects
on its first run and sends the servers' tools to the model (see :mod:`robotlab.mcp.management`).
:class:`MCPClient` talks to one server directly, :class:`ServerDiscovery` picks the servers a
message is about, and :mod:`robotlab.mcp.connections` keeps the sessions on a background loop.

Serving robots: :func:`create_server` turns robots and networks into an SDK ``MCPServer`` with
one tool per robot; :func:`serve` runs it over stdio or streamable HTTP
(``python -m robotlab.mcp.server myapp.robots:support``).

Importing this package does not import the MCP SDK; each name loads its module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import MCPClient, content_text
    from .connections import ConnectionManager, get_manager
    from .discovery import ServerDiscovery
    from .management import MCPToolset, discover_tools
    from .poller import ConnectionPoller
    from .server import BackgroundHTTPServer, create_server, serve
    from .server_config import DEFAULT_TIMEOUT, VALID_TRANSPORT_TYPES, ServerConfig
    from .session import Connection

_EXPORTS: dict[str, str] = {
    "BackgroundHTTPServer": "server",
    "Connection": "session",
    "ConnectionManager": "connections",
    "ConnectionPoller": "poller",
    "DEFAULT_TIMEOUT": "server_config",
    "MCPClient": "client",
    "MCPToolset": "management",
    "ServerConfig": "server_config",
    "ServerDiscovery": "discovery",
    "VALID_TRANSPORT_TYPES": "server_config",
    "content_text": "client",
    "create_server": "server",
    "discover_tools": "management",
    "get_manager": "connections",
    "serve": "server",
}

__all__ = [
    "DEFAULT_TIMEOUT",
    "VALID_TRANSPORT_TYPES",
    "BackgroundHTTPServer",
    "Connection",
    "ConnectionManager",
    "ConnectionPoller",
    "MCPClient",
    "MCPToolset",
    "ServerConfig",
    "ServerDiscovery",
    "content_text",
    "create_server",
    "discover_tools",
    "get_manager",
    "serve",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'robotlab.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
