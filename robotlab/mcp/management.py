"""MCPToolset: a robot's MCP servers and their tools (RobotLab's ``Robot::MCPManagement``).

A robot connects its MCP servers lazily, on the first run whose resolved ``mcp`` is not empty,
and keeps the connections for its life. Each tool a server lists becomes one of the robot's
tools (``tool.mcp`` names the server); it is sent to the model like a local tool whenever the
run's tools resolve (``tools="inherit"``, the run default). A server that fails to connect is
logged and skipped, never raised, and tried again on later runs that still need it. With
``mcp_discovery=True`` the first run connects only the servers its message is about
(:class:`~robotlab.mcp.ServerDiscovery`).

Every robot has one (``robot.mcp``); the robot's ``connect_mcp``, ``inject_mcp``, ``mcp_client`` and
``disconnect`` hand over to it.

This module does not import the MCP SDK; :mod:`robotlab.mcp.client` is loaded on first connect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import MCPError
from ..tools import Tool
from .server_config import check_servers, server_name

if TYPE_CHECKING:
    from .client import MCPClient

__all__ = ["MCPToolset", "discover_tools"]

logger = logging.getLogger("robotlab")

_T = TypeVar("_T")


class _Named(Protocol):
    name: str


class MCPToolset:
    """A robot's MCP servers: their connected clients, the tools they list, and the ones that failed.

    Args:
        owner: The robot (its ``name`` labels the log lines).
        local_tools: Returns the robot's own tools (an MCP tool of the same name is skipped).
        discovery: Connect, on the first run, only the servers its message is about.
    """

    def __init__(self, owner: _Named, *, local_tools: Callable[[], list[Tool]], discovery: bool = False) -> None:
        self._owner = owner
        self._local_tools = local_tools
        self.discovery = discovery
        self.clients: dict[str, Any] = {}
        self.tools: list[Tool] = []
        self._initialized = False
        self._failed: dict[str, Any] = {}
        self._errors: dict[str, MCPError] = {}
        self._skipped: set[str] = set()
        self._lock: asyncio.Lock | None = None

    def check(self, servers: list[Any], setting: object = None) -> None:
        """Raise :class:`~robotlab.errors.ConfigurationError` for a server entry that can never work.

        Args:
            servers: the robot's ``mcp_servers`` entries (see :func:`~robotlab.mcp.server_config.check_servers`).
            setting: the robot's ``mcp`` setting; its entries are checked too when it is a list.
        """
        listed = setting if isinstance(setting, list) else []
        check_servers([*servers, *listed], robot_name=self._owner.name)

    @property
    def failed_server_names(self) -> list[str]:
        """The servers that could not be connected (they are tried again on later runs)."""
        return list(self._failed)

    @property
    def errors(self) -> dict[str, MCPError]:
        """Why each server in :attr:`failed_server_names` failed."""
        return dict(self._errors)

    def client(self, name: str) -> MCPClient | None:
        """The connected client of server ``name``, or ``None``."""
        client: MCPClient | None = self.clients.get(name)
        return client

    # -- connecting ----------------------------------------------------------------------------
    async def connect(self, servers: list[Any], *, message: str | None = None) -> None:
        """Make sure ``servers`` are connected (a no-op without servers); failures are logged, never raised."""
        if servers:
            from .connections import get_manager

            await get_manager().run(self._ensure_clients(servers, message))

    def connect_blocking(self, servers: list[Any]) -> None:
        """Blocking :meth:`connect` (on RobotLab's background loop)."""
        from ..runtime import run_sync

        run_sync(self.connect(servers))

    async def _ensure_clients(self, servers: list[Any], message: str | None) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._initialized:
                selected = servers
                if self.discovery:
                    from .discovery import ServerDiscovery

                    selected = ServerDiscovery.select(message or "", from_=servers)
                    chosen = {server_name(s) for s in selected}
                    self._skipped = {server_name(s) for s in servers} - chosen
                await asyncio.gather(*(self._init_client(s) for s in selected))
                self._initialized = True
                return
            needed = {server_name(s): s for s in servers}
            retry = {name: cfg for name, cfg in self._failed.items() if name in needed}
            for name in retry:
                logger.info("Robot '%s' retrying MCP server: %s", self._owner.name, name)
            fresh = [
                cfg
                for name, cfg in needed.items()
                if name not in self.clients and name not in self._failed and name not in self._skipped
            ]
            await asyncio.gather(*(self._init_client(s, retry=True) for s in [*retry.values(), *fresh]))

    async def _init_client(self, config: Any, *, retry: bool = False) -> None:
        from .client import MCPClient

        robot, name = self._owner.name, server_name(config)
        try:
            client = MCPClient(config)
        except (TypeError, ValueError) as exc:
            self._record_failure(name, config, MCPError(f"Invalid MCP server config '{name}': {exc}"))
            logger.warning("Robot '%s' error connecting to MCP server '%s': %s", robot, name, exc)
            return
        await client.aconnect()
        if client.error is not None or not client.is_connected:
            self._record_failure(name, config, client.error or MCPError(f"Not connected to MCP server: {name}"))
            if retry:
                logger.warning("Robot '%s' retry failed for MCP server '%s': %s", robot, name, client.error)
            else:
                logger.warning("Robot '%s' failed to connect to MCP server: %s", robot, name)
            return
        try:
            await self._discover_tools(client)
        except MCPError as exc:
            await client.adisconnect()
            self._record_failure(name, config, exc)
            logger.warning("Robot '%s' error connecting to MCP server '%s': %s", robot, name, exc)
            return
        self.clients[client.name] = client
        self._failed.pop(name, None)
        self._errors.pop(name, None)
        if retry:
            logger.info("Robot '%s' successfully connected to MCP server '%s' on retry", robot, name)

    def _record_failure(self, name: str, config: Any, error: MCPError) -> None:
        self._failed[name] = config
        self._errors[name] = error

    async def _discover_tools(self, client: MCPClient) -> None:
        taken = {t.name for t in [*self._local_tools(), *self.tools]}
        added = 0
        for tool in await discover_tools(client):
            if tool.name in taken:
                logger.warning(
                    "Robot '%s': MCP tool '%s' of server '%s' is skipped: a tool of that name exists",
                    self._owner.name,
                    tool.name,
                    client.name,
                )
                continue
            taken.add(tool.name)
            self.tools.append(tool)
            added += 1
        logger.info("Robot '%s' discovered %d tools from MCP server '%s'", self._owner.name, added, client.name)

    # -- injecting and disconnecting -------------------------------------------------------------
    def inject(self, *, clients: dict[str, Any] | list[Any], tools: list[Tool]) -> None:
        """Use MCP clients connected elsewhere (a host application's) and their tools.

        ``clients`` maps server names to connected :class:`~robotlab.mcp.MCPClient` objects (a
        list is keyed by each client's name). Nothing else is connected on later runs except
        servers that are new to the robot.
        """
        self.clients = dict(clients if isinstance(clients, dict) else {c.name: c for c in clients})
        self.tools = list(tools)
        self._initialized = True

    async def adisconnect(self) -> None:
        """Close every connection and forget the MCP tools; a later run connects again."""
        clients = list(self.clients.values())
        await asyncio.gather(
            *(c.adisconnect() for c in clients if hasattr(c, "adisconnect")), return_exceptions=True
        )
        self.clients = {}
        self.tools = []
        self._initialized = False
        self._failed, self._errors, self._skipped, self._lock = {}, {}, set(), None

    def run_sync(self, work: Coroutine[Any, Any, _T]) -> _T:
        """Block on ``work`` on the MCP connections' loop (for the robot's blocking wrappers)."""
        from .connections import get_manager

        result: _T = get_manager().run_sync(work)
        return result


async def discover_tools(client: MCPClient) -> list[Tool]:
    """One robot tool per tool that ``client``'s server lists (for :meth:`MCPToolset.inject`).

    Raises:
        MCPError: the client is not connected, or listing failed.
    """
    return [_mcp_tool(client, definition) for definition in await client.alist_tools()]


def _mcp_tool(client: MCPClient, definition: dict[str, Any]) -> Tool:
    """A robot tool that calls ``definition``'s tool on ``client``'s server."""
    from .client import content_text

    tool_name = str(definition["name"])

    async def handler(arguments: dict[str, Any]) -> Any:
        result = await client.acall_tool(tool_name, arguments)
        return content_text(result) if isinstance(result, list) else result

    return Tool.create(
        name=tool_name,
        description=definition.get("description") or "",
        parameters=definition.get("inputSchema") or {},
        handler=handler,
        mcp=client.name,
    )
