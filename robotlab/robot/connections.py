"""A robot's connections: its place on a message bus and its MCP servers, as methods of the robot.

:class:`Connections` is a base of :class:`~robotlab.Robot`. Its methods hand over to the robot's parts:
the :class:`~robotlab.robot.mailbox.Mailbox` (``robot.mailbox``: send, receive, reply, serve) and the
:class:`~robotlab.mcp.management.MCPToolset` (``robot.mcp``: connect, inject, disconnect).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from ..config import get_config
from .plan import resolve_mcp, setting

if TYPE_CHECKING:
    from ..bus import BusPoller, Delivery, Handler, MessageBus, RobotMessage
    from ..mcp.client import MCPClient
    from ..mcp.management import MCPToolset
    from ..run_config import RunConfig
    from ..tools import Tool
    from .mailbox import Mailbox

__all__ = ["Connections"]


class Connections:
    """The message-bus and MCP methods of a robot (see :class:`~robotlab.Robot`)."""

    config: RunConfig
    mailbox: Mailbox
    mcp: MCPToolset

    # -- the message bus (see :class:`~robotlab.robot.mailbox.Mailbox`) --------------------
    def send_message(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
        """Send ``content`` to the robot(s) named ``to``; recorded in ``outbox`` as ``"sent"``."""
        return self.mailbox.send(to=to, content=content)

    async def asend_message(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
        """:meth:`send_message` for coroutines."""
        return await self.mailbox.asend(to=to, content=content)

    def send_reply(self, *, to: str, content: str | dict[str, Any], in_reply_to: str) -> RobotMessage:
        """Answer the message whose key is ``in_reply_to``."""
        return self.mailbox.reply(to=to, content=content, in_reply_to=in_reply_to)

    async def asend_reply(self, *, to: str, content: str | dict[str, Any], in_reply_to: str) -> RobotMessage:
        """:meth:`send_reply` for coroutines."""
        return await self.mailbox.areply(to=to, content=content, in_reply_to=in_reply_to)

    def on_message(self, handler: Handler) -> Handler:
        """Handle incoming messages with ``handler``; usable as a decorator (see :meth:`Mailbox.on_message`)."""
        return self.mailbox.on_message(handler)

    def respond_to_tasks(self, handler: Handler | None = None, *, auto_reply: bool = True) -> Any:
        """Answer each incoming task (not replies) with ``handler(message)``'s return value."""
        return self.mailbox.respond_to_tasks(handler, auto_reply=auto_reply)

    def serve(self, *, auto_reply: bool = True) -> Self:
        """Answer each incoming task with this robot's ``arun(content).reply``."""
        self.mailbox.serve(auto_reply=auto_reply)
        return self

    def with_bus(self, bus: MessageBus | None = None) -> Self:
        """Join ``bus`` (leaving the current one), or, without one, rejoin the current bus or a new one."""
        self.mailbox.join(bus)
        return self

    def assign_bus_poller(self, poller: BusPoller, *, group: str = "default") -> None:
        """Route this robot's deliveries through ``poller`` (a network's shared one) under ``group``."""
        self.mailbox.assign_poller(poller, group=group)

    async def _process_delivery(self, delivery: Delivery) -> None:
        await self.mailbox.process(delivery)

    # -- MCP (see :class:`~robotlab.mcp.MCPToolset`) ----------------------------------------
    def _mcp_servers(self) -> list[Any]:
        """The MCP servers the robot's own setting resolves to (what a run with ``mcp="inherit"`` connects)."""
        return resolve_mcp(setting(self.config, "mcp"), "inherit", None, get_config())

    async def aconnect_mcp(self) -> Self:
        """Connect the robot's MCP servers now rather than on the first run; returns the robot."""
        await self.mcp.connect(self._mcp_servers())
        return self

    def connect_mcp(self) -> Self:
        """Blocking :meth:`aconnect_mcp` (for example to show connection status at start-up)."""
        self.mcp.connect_blocking(self._mcp_servers())
        return self

    def inject_mcp(self, *, clients: dict[str, Any] | list[Any], tools: list[Tool]) -> Self:
        """Use MCP clients connected elsewhere and their tools (see :meth:`MCPToolset.inject`)."""
        self.mcp.inject(clients=clients, tools=tools)
        return self

    def mcp_client(self, name: str) -> MCPClient | None:
        """The connected client of MCP server ``name``, or ``None``."""
        return self.mcp.client(name)

    async def adisconnect(self) -> Self:
        """Close every MCP connection of the robot and leave its bus; a later run connects again."""
        await self.mcp.adisconnect()
        self.mailbox.leave()
        return self

    def disconnect(self) -> Self:
        """Blocking :meth:`adisconnect`."""
        return self.mcp.run_sync(self.adisconnect())
