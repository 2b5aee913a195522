"""The attributes a robot reads from its parts: ``robot.template`` is ``robot.persona.template``, and so on.

:class:`Parts` is a base of :class:`~robotlab.Robot`. Each of its attributes is a one-line delegation
(:class:`Forward`) to the robot's persona, learnings, mailbox, MCP toolset or budget, so the robot keeps no
copy of what a part holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

if TYPE_CHECKING:
    from ..agent_skill import AgentSkill
    from ..budget import Ledger
    from ..bus import MessageBus
    from ..tools import Tool

__all__ = ["Forward", "Parts"]

T = TypeVar("T")


class Forward(Generic[T]):
    """A robot attribute that is an attribute of one of its parts (a one-line delegation)."""

    def __init__(self, part: str, attribute: str, doc: str, *, writable: bool = False) -> None:
        self.part, self.attribute, self.__doc__, self.writable = part, attribute, doc, writable

    @overload
    def __get__(self, robot: None, owner: type) -> Forward[T]: ...
    @overload
    def __get__(self, robot: object, owner: type) -> T: ...
    def __get__(self, robot: object | None, owner: type) -> T | Forward[T]:
        return self if robot is None else cast(T, getattr(getattr(robot, self.part), self.attribute))

    def __set__(self, robot: object, value: T) -> None:
        if not self.writable:
            raise AttributeError(f"'{self.attribute}' is read-only here; it belongs to the robot's {self.part}")
        setattr(getattr(robot, self.part), self.attribute, value)


class Parts:
    """The attributes of a robot that belong to its parts (see :class:`~robotlab.Robot`)."""

    template: Forward[str | None] = Forward("persona", "template", "The template id, or ``None``.")
    skills: Forward[list[str]] = Forward("persona", "skills", "The skill ids (the template's included).")
    agent_skills: Forward[list[AgentSkill]] = Forward("persona", "agent_skills", "The pending AgentSkills.")
    bus: Forward[MessageBus | None] = Forward("mailbox", "bus", "The message bus joined, or ``None``.")
    outbox: Forward[dict[str, dict[str, Any]]] = Forward("mailbox", "outbox", "Sent messages by key.")
    budget_ledger: Forward[Ledger | None] = Forward("budget", "ledger", "The ledger (``None`` without budgets).")
    mcp_clients: Forward[dict[str, Any]] = Forward("mcp", "clients", "Connected MCP clients by server name.")
    mcp_tools: Forward[list[Tool]] = Forward("mcp", "tools", "The tools discovered on MCP servers.")
    failed_mcp_server_names: Forward[list[str]] = Forward("mcp", "failed_server_names", "MCP servers that failed.")
    learnings: Forward[list[str]] = Forward("_learned", "items", "What the robot has learned, oldest first.")
    total_input_tokens: Forward[int] = Forward("budget", "total_input_tokens", "Input tokens of all runs.")
    total_output_tokens: Forward[int] = Forward("budget", "total_output_tokens", "Output tokens of all runs.")

    system_prompt: Forward[str | None] = Forward(
        "persona", "system_prompt", "The inline instructions, after the template's.", writable=True)
