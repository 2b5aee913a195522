"""MCPClient: one MCP server's tools, resources and prompts (RobotLab's ``MCP::Client``), over the SDK.

Every transport is the official SDK's (stdio, streamable HTTP, SSE, in process); the session
lives on RobotLab's background loop (:mod:`robotlab.mcp.connections`), so the same client works
from sync code and from any event loop. Each method has a blocking form and an ``a``-prefixed
``async`` form::

    client = MCPClient({"name": "time", "transport": {"type": "stdio", "command": "mcp-server-time"}})
    client.connect()                      # never raises: check client.is_connected / client.error
    client.list_tools()                   # [{"name": "get_current_time", "inputSchema": {...}, ...}]
    client.call_tool("get_current_time", {"timezone": "UTC"})   # [{"type": "text", "text": "..."}]
    client.disconnect()

Results are plain JSON-ready dicts in the protocol's spelling (``inputSchema``, ``mimeType``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import MCPError
from .connections import ConnectionManager, get_manager
from .failures import connect_error
from .poller import ConnectionPoller

if TYPE_CHECKING:
    from pydantic import BaseModel
from .server_config import ServerConfig
from .session import Connection

__all__ = ["MCPClient", "content_text"]

logger = logging.getLogger("robotlab")

T = TypeVar("T")


def _dump(model: BaseModel) -> dict[str, Any]:
    data: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return data


def content_text(content: object) -> str:
    """MCP content blocks as text: text blocks joined by newlines, other blocks as JSON."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, default=str, ensure_ascii=False)
    parts = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            parts.append(json.dumps(block, default=str, ensure_ascii=False))
    return "\n".join(parts)


class MCPClient:
    """A client of one MCP server.

    Args:
        server_or_config: A :class:`ServerConfig`, a config dict, or an SDK server object.
        poller: A :class:`ConnectionPoller` to group this client with (stdio clients only).
        manager: The :class:`ConnectionManager` to take the connection from (the process-wide
            one by default, which shares one session among clients of equal configurations).

    Raises:
        TypeError: ``server_or_config`` is none of those (``"Invalid server config"``).
        ValueError: the config dict is invalid (see :class:`ServerConfig`).
    """

    def __init__(
        self,
        server_or_config: Any,
        *,
        poller: ConnectionPoller | None = None,
        manager: ConnectionManager | None = None,
    ) -> None:
        self.server = ServerConfig.from_value(server_or_config)
        self.poller = poller
        self._manager = manager
        self._connection: Connection | None = None
        self.error: MCPError | None = None
        """Why the last :meth:`connect` failed (``None`` after a successful one)."""

    @property
    def name(self) -> str:
        """The server's name."""
        return self.server.name

    @property
    def manager(self) -> ConnectionManager:
        """Where the session lives: the poller (stdio only), the given manager, or the process-wide one."""
        if self.poller is not None and self.server.transport_type == "stdio":
            return self.poller
        return self._manager or get_manager()

    @property
    def is_connected(self) -> bool:
        """Whether :meth:`connect` succeeded and :meth:`disconnect` has not been called since."""
        return self._connection is not None and not self._connection.is_closed

    @property
    def connection(self) -> Connection | None:
        """The shared :class:`Connection` (``None`` until connected)."""
        return self._connection

    # -- connecting --------------------------------------------------------------------------------
    async def aconnect(self) -> MCPClient:
        """Connect (idempotent).

        A failure is logged (``"MCP connection failed for <name>: ..."``), kept in :attr:`error`, and leaves the
        client disconnected; it is not raised.
        """
        if self.is_connected:
            return self
        try:
            self._connection = await self.manager.acquire(self.server)
        except Exception as exc:
            self.error = connect_error(self.server, exc)
            self._connection = None
            logger.warning("MCP connection failed for %s: %s", self.server.name, self.error)
            return self
        self.error = None
        if self.poller is not None:
            self.poller.register(self)
        return self

    def connect(self) -> MCPClient:
        """Blocking :meth:`aconnect`."""
        return get_manager().run_sync(self.aconnect())

    async def adisconnect(self) -> MCPClient:
        """Give the connection back; the last client of a server closes it and stops its process."""
        connection, self._connection = self._connection, None
        if self.poller is not None:
            self.poller.unregister(self)
        if connection is not None:
            await connection.manager.release(connection)
        return self

    def disconnect(self) -> MCPClient:
        """Blocking :meth:`adisconnect`."""
        return get_manager().run_sync(self.adisconnect())

    # -- requests ----------------------------------------------------------------------------------
    async def _request(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        if self._connection is None or self._connection.is_closed:
            raise MCPError(f"Not connected to MCP server: {self.server.name}", server_name=self.server.name)
        return await self._connection.call(fn)

    async def _raw_request(self, message: Mapping[str, Any]) -> dict[str, Any]:
        """Send one JSON-RPC request (``method`` and ``params``) and return its result (for the poller)."""
        import mcp_types as types
        from pydantic import TypeAdapter

        request = types.Request[dict[str, Any], str](
            method=str(message["method"]), params=dict(message.get("params") or {})
        )
        adapter = TypeAdapter(dict[str, Any])

        async def send(client: Any) -> dict[str, Any]:
            result: dict[str, Any] = await client.session.send_request(request, adapter)
            return result

        return await self._request(send)

    async def alist_tools(self) -> list[dict[str, Any]]:
        """The server's tools: dicts with ``name``, ``description`` and ``inputSchema``.

        Raises:
            MCPError: not connected, or the request failed.
        """
        return await self._request(lambda c: self._all_pages(c.list_tools, "tools"))

    @staticmethod
    async def _all_pages(fetch: Callable[..., Awaitable[Any]], field: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await fetch(cursor=cursor)
            items.extend(_dump(item) for item in getattr(page, field))
            cursor = page.next_cursor
            if not cursor:
                return items

    async def acall_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call a tool; returns its content blocks (its structured content when it has no blocks).

        Raises:
            MCPError: not connected, the request failed, or the tool reported an error
                (``"MCP tool '<name>' failed on server '<server>': <text>"``).
        """

        async def call(client: Any) -> Any:
            result = await client.call_tool(name, dict(arguments or {}))
            content = [_dump(block) for block in result.content]
            if result.is_error:
                raise MCPError(
                    f"MCP tool '{name}' failed on server '{self.server.name}': {content_text(content)}"
                )
            if not content and result.structured_content is not None:
                return result.structured_content
            return content

        return await self._request(call)

    async def alist_resources(self) -> list[dict[str, Any]]:
        """The server's resources (``uri``, ``name``, ``mimeType``, ...)."""
        return await self._request(lambda c: self._all_pages(c.list_resources, "resources"))

    async def aread_resource(self, uri: str) -> list[dict[str, Any]]:
        """A resource's contents: dicts with ``uri`` and ``text`` or ``blob``."""

        async def read(client: Any) -> list[dict[str, Any]]:
            result = await client.read_resource(uri)
            return [_dump(item) for item in result.contents]

        return await self._request(read)

    async def alist_prompts(self) -> list[dict[str, Any]]:
        """The server's prompts (``name``, ``description``, ``arguments``)."""
        return await self._request(lambda c: self._all_pages(c.list_prompts, "prompts"))

    async def aget_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A rendered prompt: ``{"description": ..., "messages": [{"role": ..., "content": {...}}]}``."""

        async def get(client: Any) -> dict[str, Any]:
            result = await client.get_prompt(name, {str(k): str(v) for k, v in (arguments or {}).items()})
            return {k: v for k, v in _dump(result).items() if k in ("description", "messages")}

        return await self._request(get)

    def list_tools(self) -> list[dict[str, Any]]:
        """Blocking :meth:`alist_tools`."""
        return get_manager().run_sync(self.alist_tools())

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Blocking :meth:`acall_tool`."""
        return get_manager().run_sync(self.acall_tool(name, arguments))

    def list_resources(self) -> list[dict[str, Any]]:
        """Blocking :meth:`alist_resources`."""
        return get_manager().run_sync(self.alist_resources())

    def read_resource(self, uri: str) -> list[dict[str, Any]]:
        """Blocking :meth:`aread_resource`."""
        return get_manager().run_sync(self.aread_resource(uri))

    def list_prompts(self) -> list[dict[str, Any]]:
        """Blocking :meth:`alist_prompts`."""
        return get_manager().run_sync(self.alist_prompts())

    def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Blocking :meth:`aget_prompt`."""
        return get_manager().run_sync(self.aget_prompt(name, arguments))

    def to_dict(self) -> dict[str, Any]:
        """``{"server": <config dict>, "connected": bool}``."""
        return {"server": self.server.to_dict(), "connected": self.is_connected}

    def __repr__(self) -> str:
        return f"<MCPClient {self.server.name!r} connected={self.is_connected}>"
