"""MCPManagement: the MCP half of :class:`~robotlab.Robot` (RobotLab's ``Robot::MCPManagement``).

A robot connects its MCP servers lazily, on the first run whose resolved ``mcp`` is not empty,
and keeps the connections for its life. Each tool a server lists becomes one of the robot's
tools (``tool.mcp`` names the server); it is sent to the model like a local tool whenever the
run's tools resolve (``tools="inherit"``, the run default). A server that fails to connect is
logged and skipped, never raised, and tried again on later runs that still need it. With
``mcp_discovery=True`` the first run connects only the servers its message is about
(:class:`~robotlab.mcp.ServerDiscovery`).

This module does not import the MCP SDK; :mod:`robotlab.mcp.client` is loaded on first connect.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ..errors import MCPError
from ..tools import Tool
from .server_config import server_name

if TYPE_CHECKING:
    from .client import MCPClient

__all__ = ["MCPManagement", "discover_tools"]

logger = logging.getLogger("robotlab")


class MCPManagement:
    """MCP connections and tools for a robot: ``connect_mcp``, ``mcp_client``, ``inject_mcp``, ``disconnect``.

    Expects the robot to set ``name``, ``mcp_discovery``, ``mcp_clients`` (a dict),
    ``mcp_tools`` (a list), ``local_tools`` and ``resolve_mcp``.
    """

    name: str
    mcp_discovery: bool
    mcp_clients: dict[str, Any]
    mcp_tools: list[Tool]
    local_tools: list[Tool]
    _mcp_initialized: bool = False
    _mcp_state: dict[str, Any] | None = None

    def resolve_mcp(
        self, mcp: Any = "inherit", *, network_config: Any = None
    ) -> list[Any]:  # pragma: no cover
        """Provided by the robot."""
        raise NotImplementedError

    # -- state ---------------------------------------------------------------------------------
    @property
    def _mcp(self) -> dict[str, Any]:
        if self._mcp_state is None:
            self._mcp_state = {"failed": {}, "errors": {}, "skipped": set(), "lock": None}
        return self._mcp_state

    @property
    def failed_mcp_server_names(self) -> list[str]:
        """The servers that could not be connected (they are tried again on later runs)."""
        return list(self._mcp["failed"])

    @property
    def mcp_errors(self) -> dict[str, MCPError]:
        """Why each server in :attr:`failed_mcp_server_names` failed."""
        return dict(self._mcp["errors"])

    def mcp_client(self, name: str) -> MCPClient | None:
        """The connected client of server ``name``, or ``None``."""
        client: MCPClient | None = self.mcp_clients.get(name)
        return client

    # -- connecting ----------------------------------------------------------------------------
    async def aconnect_mcp(self) -> Any:
        """Connect the robot's MCP servers now rather than on the first run; returns the robot."""
        servers = self.resolve_mcp("inherit")
        if servers:
            await self._connect_mcp_servers(servers, message=None)
        return self

    def connect_mcp(self) -> Any:
        """Blocking :meth:`aconnect_mcp` (for example to show connection status at start-up)."""
        from .._runtime import run_sync

        return run_sync(self.aconnect_mcp())

    async def _connect_mcp_servers(self, servers: list[Any], *, message: str | None) -> None:
        """Make sure the servers a run needs are connected (called by the robot before each run)."""
        from .connections import get_manager

        await get_manager().run(self._ensure_mcp_clients(servers, message))

    async def _ensure_mcp_clients(self, servers: list[Any], message: str | None) -> None:
        state = self._mcp
        if state["lock"] is None:
            state["lock"] = asyncio.Lock()
        async with state["lock"]:
            if not self._mcp_initialized:
                selected = servers
                if self.mcp_discovery:
                    from .discovery import ServerDiscovery

                    selected = ServerDiscovery.select(message or "", from_=servers)
                    chosen = {server_name(s) for s in selected}
                    state["skipped"] = {server_name(s) for s in servers} - chosen
                await asyncio.gather(*(self._init_mcp_client(s) for s in selected))
                self._mcp_initialized = True
                return
            needed = {server_name(s): s for s in servers}
            retry = {name: cfg for name, cfg in state["failed"].items() if name in needed}
            for name in retry:
                logger.info("Robot '%s' retrying MCP server: %s", self.name, name)
            fresh = [
                cfg
                for name, cfg in needed.items()
                if name not in self.mcp_clients
                and name not in state["failed"]
                and name not in state["skipped"]
            ]
            await asyncio.gather(*(self._init_mcp_client(s, retry=True) for s in [*retry.values(), *fresh]))

    async def _init_mcp_client(self, config: Any, *, retry: bool = False) -> None:
        from .client import MCPClient

        state = self._mcp
        name = server_name(config)
        try:
            client = MCPClient(config)
        except (TypeError, ValueError) as exc:
            self._mcp_failed(name, config, MCPError(f"Invalid MCP server config '{name}': {exc}"))
            logger.warning("Robot '%s' error connecting to MCP server '%s': %s", self.name, name, exc)
            return
        await client.aconnect()
        if client.error is not None or not client.is_connected:
            self._mcp_failed(name, config, client.error or MCPError(f"Not connected to MCP server: {name}"))
            if retry:
                logger.warning(
                    "Robot '%s' retry failed for MCP server '%s': %s", self.name, name, client.error
                )
            else:
                logger.warning("Robot '%s' failed to connect to MCP server: %s", self.name, name)
            return
        try:
            await self._discover_mcp_tools(client)
        except MCPError as exc:
            await client.adisconnect()
            self._mcp_failed(name, config, exc)
            logger.warning("Robot '%s' error connecting to MCP server '%s': %s", self.name, name, exc)
            return
        self.mcp_clients[client.name] = client
        state["failed"].pop(name, None)
        state["errors"].pop(name, None)
        if retry:
            logger.info("Robot '%s' successfully connected to MCP server '%s' on retry", self.name, name)

    def _mcp_failed(self, name: str, config: Any, error: MCPError) -> None:
        self._mcp["failed"][name] = config
        self._mcp["errors"][name] = error

    async def _discover_mcp_tools(self, client: MCPClient) -> None:
        taken = {t.name for t in [*self.local_tools, *self.mcp_tools]}
        added = 0
        for tool in await discover_tools(client):
            if tool.name in taken:
                logger.warning(
                    "Robot '%s': MCP tool '%s' of server '%s' is skipped: a tool of that name exists",
                    self.name,
                    tool.name,
                    client.name,
                )
                continue
            taken.add(tool.name)
            self.mcp_tools.append(tool)
            added += 1
        logger.info("Robot '%s' discovered %d tools from MCP server '%s'", self.name, added, client.name)

    # -- injecting and disconnecting -------------------------------------------------------------
    def inject_mcp(self, *, clients: dict[str, Any] | list[Any], tools: list[Tool]) -> Any:
        """Use MCP clients connected elsewhere (a host application's) and their tools; returns the robot.

        ``clients`` maps server names to connected :class:`~robotlab.mcp.MCPClient` objects (a
        list is keyed by each client's name). The robot connects nothing else on later runs
        except servers that are new to it.
        """
        by_name = clients if isinstance(clients, dict) else {c.name: c for c in clients}
        self.mcp_clients = dict(by_name)
        self.mcp_tools = list(tools)
        self._mcp_initialized = True
        return self

    async def adisconnect(self) -> Any:
        """Close every MCP connection of the robot and leave its bus; returns the robot.

        The robot forgets its MCP tools; a later run connects again.
        """
        clients = list(self.mcp_clients.values())
        await asyncio.gather(
            *(c.adisconnect() for c in clients if hasattr(c, "adisconnect")), return_exceptions=True
        )
        self.mcp_clients = {}
        self.mcp_tools = []
        self._mcp_initialized = False
        self._mcp_state = None
        if getattr(self, "bus", None) is not None and hasattr(self, "leave_bus"):
            self.leave_bus()
        return self

    def disconnect(self) -> Any:
        """Blocking :meth:`adisconnect`."""
        from .connections import get_manager

        return get_manager().run_sync(self.adisconnect())


async def discover_tools(client: MCPClient) -> list[Tool]:
    """One robot tool per tool that ``client``'s server lists (for :meth:`MCPManagement.inject_mcp`).

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
