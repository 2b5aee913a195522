"""The options a robot is built with: :class:`RobotOptions`, and :class:`RobotKwargs`, their typed keywords.

``robotlab.build(**options)`` and ``Robot(**options)`` take the keyword arguments of :class:`RobotOptions`
(a ready ``RobotOptions`` may be passed to ``Robot`` instead). :class:`RobotKwargs` names the same options
with their types, so an editor completes them and a type checker flags a misspelt one; at run time an
unknown option raises :class:`~robotlab.errors.ConfigurationError`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from .. import tool_config
from ..errors import ConfigurationError
from ..run_config import RunConfig
from ..tools import FunctionTool, Tool
from .request import RunCallbacks

if TYPE_CHECKING:
    from ..bus import MessageBus
    from ..llm import LLM
    from ..memory import Memory
    from .core import Robot
    from .request import ContentCallback, ToolCallCallback, ToolResultCallback

__all__ = ["MCPSetting", "RobotKwargs", "RobotOptions", "TemplateContext", "ToolSource", "ToolsSetting",
           "coerce_tools"]

#: A level of the tools hierarchy: ``"none"``, ``"inherit"`` or a list of tool names (``None``: unset).
ToolsSetting = str | Sequence[str] | None
#: A level of the MCP hierarchy: ``"none"``, ``"inherit"`` or a list of server configurations.
MCPSetting = str | Sequence[object] | None
#: What ``local_tools`` takes: a :class:`Tool`, a ``Tool`` subclass (built for the robot), or a typed function.
ToolSource = Tool | type[Tool] | Callable[..., object]
#: Template parameters: a dict, or a callable returning one (called when the template renders).
TemplateContext = Mapping[str, Any] | Callable[[], Mapping[str, Any]]

#: The options that are LLM and limit settings (they go into the robot's :class:`RunConfig`).
_RUN_CONFIG_OPTIONS = ("model", "temperature", "top_p", "top_k", "max_tokens", "presence_penalty",
                       "frequency_penalty", "stop", "max_tool_rounds", "token_budget", "cost_budget",
                       "doom_loop_threshold", "enable_cache")


@dataclass(kw_only=True)
class RobotOptions:
    """Everything a robot is built with (the keyword arguments of :func:`robotlab.build`).

    Attributes:
        name: The robot's name (``"robot"`` lets a template's ``robot_name`` rename it).
        template: A template id under the template directory (see :mod:`robotlab.templates`).
        system_prompt: Instructions; appended after the template's when both are given.
        context: Template parameters (a dict, or a callable returning one).
        description: What the robot does (used by routing and MCP serving).
        local_tools: Tools: :class:`Tool` instances or subclasses, or plain typed functions.
        model: A litellm model name (``openai/gpt-4o-mini``). Defaults to the template's, then
            ``ROBOT_LAB_MODEL``, then the default of a provider whose API key is set.
        provider: Prefix for a bare model name (``provider="ollama", model="llama3"``).
        llm: The :class:`~robotlab.llm.LLM` to send requests to (a ``FakeLLM`` in tests);
            by default :class:`~robotlab.llm.transport.AutoLLM` (the direct client or litellm, per model).
        mcp_servers: MCP server configurations for this robot.
        mcp: ``"none"``, ``"inherit"`` or a list of servers (the MCP hierarchy).
        tools: ``"none"``, ``"inherit"`` or a list of tool names (the tools hierarchy).
        on_tool_call: Called with each :class:`~robotlab.robot.request.ToolCall` before it runs.
        on_tool_result: Called with each tool's return value.
        on_content: Called with each streamed :class:`~robotlab.streaming.Chunk` of text.
        enable_cache: Whether the robot's memory caches LLM responses.
        bus: A :class:`~robotlab.bus.MessageBus` to join (see :class:`~robotlab.robot.mailbox.Mailbox`).
        skills: Skill ids. An id found in the :class:`~robotlab.agent_skill.AgentSkillCatalog` is an
            AgentSkill, matched to each run's message; any other id is a template whose body goes before
            the template's (see :mod:`robotlab.agent_skill` and the templates guide).
        temperature, top_p, top_k, max_tokens, presence_penalty, frequency_penalty, stop: LLM parameters.
        max_tool_rounds: Tool calls allowed per run before :class:`ToolLoopError`.
        token_budget: Total tokens (input + output, all runs) before :class:`BudgetExceeded`.
        cost_budget: Total cost in USD before :class:`BudgetExceeded`.
        doom_loop_threshold: Repetitions before the doom-loop warning (default 3).
        mcp_discovery: Connect, on the first run, only the MCP servers its message is about.
        config: A :class:`RunConfig` (or dict) under the explicit options.
    """

    name: str = "robot"
    template: str | None = None
    system_prompt: str | None = None
    context: TemplateContext | None = None
    description: str | None = None
    local_tools: ToolSource | Sequence[ToolSource] = ()
    model: str | None = None
    provider: str | None = None
    llm: LLM | None = None
    mcp_servers: Sequence[object] = ()
    mcp: MCPSetting = "none"
    tools: ToolsSetting = "none"
    on_tool_call: ToolCallCallback | None = None
    on_tool_result: ToolResultCallback | None = None
    on_content: ContentCallback | None = None
    enable_cache: bool = True
    bus: MessageBus | None = None
    skills: Sequence[str] | str | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    stop: str | Sequence[str] | None = None
    max_tool_rounds: int | None = None
    token_budget: int | None = None
    cost_budget: float | None = None
    doom_loop_threshold: int | None = None
    mcp_discovery: bool = False
    config: RunConfig | Mapping[str, Any] | None = field(default=None)

    @classmethod
    def parse(cls, options: Mapping[str, object], *, base: RobotOptions | None = None) -> RobotOptions:
        """Options from keyword arguments (over ``base`` when given).

        Args:
            options: The keyword arguments of ``build`` or ``Robot``.
            base: Options the keyword arguments override.

        Raises:
            ConfigurationError: an unknown option (the message lists the valid ones), or ``tools=``
                given tool objects instead of names.
        """
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(options) - valid)
        if unknown:
            raise ConfigurationError(
                f"Unknown robot option(s): {', '.join(unknown)}. Valid options: {', '.join(sorted(valid))}"
            )
        values: dict[str, Any] = dict(options)
        parsed = dataclasses.replace(base, **values) if base is not None else cls(**values)
        _validate_tools_filter(parsed.tools)
        parsed.name = str(parsed.name)
        return parsed

    def run_config(self) -> RunConfig:
        """The robot's :class:`RunConfig`: ``config`` under the explicit options (which win)."""
        effective = RunConfig(**{key: getattr(self, key) for key in _RUN_CONFIG_OPTIONS})
        mcp_value = list(self.mcp_servers) if self.mcp_servers else self.mcp
        if not tool_config.is_none_value(mcp_value):
            effective.set("mcp", mcp_value)
        if not tool_config.is_none_value(self.tools):
            effective.set("tools", self.tools)
        base = self.config if isinstance(self.config, RunConfig) else RunConfig(**dict(self.config or {}))
        return base.merge(effective)

    def run_callbacks(self) -> RunCallbacks:
        """The robot's own callbacks: ``on_content``, ``on_tool_call`` and ``on_tool_result`` (each when given)."""
        return RunCallbacks(content=[self.on_content] if self.on_content else [],
                            tool_call=[self.on_tool_call] if self.on_tool_call else [],
                            tool_result=[self.on_tool_result] if self.on_tool_result else [])

    def memory(self) -> Memory:
        """A new memory for the robot (caching LLM responses unless ``enable_cache=False``)."""
        from ..memory import Memory

        return Memory(enable_cache=self.enable_cache)


class RobotKwargs(TypedDict, total=False):
    """The options of :func:`robotlab.build` and :class:`~robotlab.Robot` as typed keywords.

    The same names as the fields of :class:`RobotOptions`, which says what each one means (a test keeps
    the two lists equal).
    """

    name: str
    template: str | None
    system_prompt: str | None
    context: TemplateContext | None
    description: str | None
    local_tools: ToolSource | Sequence[ToolSource]
    model: str | None
    provider: str | None
    llm: LLM | None
    mcp_servers: Sequence[object]
    mcp: MCPSetting
    tools: ToolsSetting
    on_tool_call: ToolCallCallback | None
    on_tool_result: ToolResultCallback | None
    on_content: ContentCallback | None
    enable_cache: bool
    bus: MessageBus | None
    skills: Sequence[str] | str | None
    temperature: float | None
    top_p: float | None
    top_k: int | None
    max_tokens: int | None
    presence_penalty: float | None
    frequency_penalty: float | None
    stop: str | Sequence[str] | None
    max_tool_rounds: int | None
    token_budget: int | None
    cost_budget: float | None
    doom_loop_threshold: int | None
    mcp_discovery: bool
    config: RunConfig | Mapping[str, Any] | None


def _validate_tools_filter(value: object) -> None:
    if value is None or isinstance(value, str):
        return
    for entry in value if isinstance(value, list | tuple) else [value]:
        if not isinstance(entry, str):
            raise ConfigurationError(
                f"tools= takes tool names (or 'none'/'inherit'), got {entry!r}; attach tool objects with local_tools="
            )


def coerce_tools(items: ToolSource | Sequence[ToolSource], robot: Robot) -> list[Tool]:
    """``local_tools`` entries as tools.

    Tool instances as they are, Tool subclasses built with ``robot=robot``, plain functions wrapped.

    Args:
        items: One entry or a list of them.
        robot: The robot that gets the tools (a ``Tool`` subclass is built with it).

    Raises:
        ConfigurationError: an entry is none of those.
    """
    tools: list[Tool] = []
    for item in items if isinstance(items, list | tuple) else [items]:
        if isinstance(item, Tool):
            tools.append(item)
        elif isinstance(item, type) and issubclass(item, Tool):
            tools.append(item(robot=robot))
        elif callable(item):
            tools.append(FunctionTool(item))
        else:
            raise ConfigurationError(f"Robot '{robot.name}': local_tools entries must be Tool instances, "
                                     f"Tool subclasses or functions, got {item!r}")
    return tools
