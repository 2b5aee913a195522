"""A robot's configuration: the options it is built with (:class:`RobotOptions`) and what they resolve to.

``robotlab.build(**options)`` and ``Robot(**options)`` take the keyword arguments of
:class:`RobotOptions` (a ready ``RobotOptions`` may be passed to ``Robot`` instead). The functions here
resolve a robot's settings through the hierarchies of the seed: its model (explicit, template,
configured, provider default), the LLM parameters of each request, and the tools and MCP servers of
a run (run > robot > network > global).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import tool_config
from ._loop import RunCallbacks
from .budget import Budget
from .config import get_config
from .errors import ConfigurationError
from .llm import LLM, AutoLLM
from .run_config import RunConfig
from .templates import LLM_FIELDS
from .tools import FunctionTool, Tool

if TYPE_CHECKING:
    from .memory import Memory
    from .persona import FrontMatter
    from .robot import Robot

__all__ = ["DEFAULT_MAX_TOOLS", "RobotOptions"]

logger = logging.getLogger("robotlab")

#: The most tools sent to the model in one request; extra tools are dropped with a warning.
DEFAULT_MAX_TOOLS = 128

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
        on_tool_call: Called with each :class:`~robotlab._loop.ToolCall` before it runs.
        on_tool_result: Called with each tool's return value.
        on_content: Called with each streamed :class:`~robotlab.streaming.Chunk` of text.
        enable_cache: Whether the robot's memory caches LLM responses.
        bus: A :class:`~robotlab.bus.MessageBus` to join (see :class:`~robotlab.mailbox.Mailbox`).
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
    context: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None
    description: str | None = None
    local_tools: Sequence[Any] | Any = ()
    model: str | None = None
    provider: str | None = None
    llm: LLM | None = None
    mcp_servers: Sequence[Any] = ()
    mcp: Any = "none"
    tools: Any = "none"
    on_tool_call: Callable[..., Any] | None = None
    on_tool_result: Callable[..., Any] | None = None
    on_content: Callable[..., Any] | None = None
    enable_cache: bool = True
    bus: Any = None
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
    def parse(cls, options: Mapping[str, Any], *, base: RobotOptions | None = None) -> RobotOptions:
        """Options from keyword arguments (over ``base`` when given).

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
        parsed = dataclasses.replace(base, **options) if base is not None else cls(**options)
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
        from .memory import Memory

        return Memory(enable_cache=self.enable_cache)


def budget(robot_name: str, config: RunConfig) -> Budget:
    """The budget of robot ``robot_name``, with ``config``'s ``token_budget`` and ``cost_budget``."""
    return Budget(robot_name=robot_name, token_budget=config.token_budget, cost_budget=config.cost_budget)


def _validate_tools_filter(value: Any) -> None:
    if value is None or isinstance(value, str):
        return
    for entry in value if isinstance(value, list | tuple) else [value]:
        if not isinstance(entry, str):
            raise ConfigurationError(
                f"tools= takes tool names (or 'none'/'inherit'), got {entry!r}; attach tool objects with local_tools="
            )


def coerce_tools(items: Sequence[Any] | Any, robot: Robot) -> list[Tool]:
    """``local_tools`` entries as tools.

    Tool instances as they are, Tool subclasses built for ``robot``, plain functions wrapped.

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


def setting(config: RunConfig, key: str) -> Any:
    """The robot's ``mcp`` or ``tools`` setting, ``"none"`` when unset."""
    value = config.get(key)
    return value if value is not None else "none"


def apply_front_matter(robot: Robot, front: FrontMatter | None) -> None:
    """Put ``robot``'s configuration over the templates' ``front`` matter.

    Front-matter MCP servers apply only when the robot has none; a template's ``robot_name`` renames a
    robot named ``"robot"``, its ``description`` fills a missing one. ``None`` (the templates were not
    reloaded) changes nothing.
    """
    if front is None:
        return
    if not tool_config.is_none_value(setting(robot.config, "mcp")):
        front.config.set("mcp", None)
    robot.config = front.config.merge(robot.config)
    if front.robot_name and robot.name == "robot":
        robot.name = front.robot_name
    if front.description and robot.description is None:
        robot.description = front.description


def resolve_model(config: RunConfig, provider: str | None) -> str | None:
    """The model: ``config``'s, else the configured default; a bare name is prefixed with ``provider``."""
    model = config.model or get_config().default_model()
    if model and provider and "/" not in model:
        model = f"{provider}/{model}"
    return model


def default_llm() -> LLM:
    """The transport ``llm_transport`` picks per model (:class:`~robotlab.llm.transport.AutoLLM`.

    The direct client or litellm) with the configured connection (a robot's ``llm`` when none was given).
    """
    settings = get_config().llm
    return AutoLLM(api_base=settings.api_base, api_key=settings.api_key, timeout=settings.request_timeout,
                   num_retries=settings.max_retries)


def llm_params(config: RunConfig, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The LLM parameters of each request: ``config``'s set LLM fields, then ``extra`` (``with_params``)."""
    params = {k: config.get(k) for k in LLM_FIELDS if k != "model" and config.get(k) is not None}
    params.update(extra)
    return params


def effective(config: RunConfig, model: str | None) -> dict[str, Any]:
    """The set LLM, tools and limit settings, with the resolved ``model``."""
    keys = (*LLM_FIELDS, "tools", "mcp", "max_tool_rounds", "doom_loop_threshold", "auto_compact",
            "compact_threshold", "token_budget", "cost_budget")
    values = {k: config.get(k) for k in keys}
    values["model"] = model
    return {k: v for k, v in values.items() if v is not None}


def _parent(network_config: RunConfig | None, key: str) -> Any:
    value = network_config.get(key) if network_config is not None else None
    return value if value is not None else getattr(get_config(), key)


def resolve_tools(robot: Robot, tools: Any, network_config: RunConfig | None) -> list[Tool]:
    """The tools a run of ``robot`` sends, by the hierarchy run > robot > network > global."""
    if tools is None:  # the default: the robot's own setting
        tools = "inherit"
    if tool_config.is_none_value(tools):
        return []
    at_build = tool_config.resolve_tools(setting(robot.config, "tools"), parent_value=_parent(network_config, "tools"))
    allowed = tool_config.resolve_tools(tools, parent_value=at_build)
    available = robot.all_tools
    selected = available if not allowed else tool_config.filter_tools(available, allowed_names=allowed)
    limit = robot.config.max_tools
    limit = limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_TOOLS
    if len(selected) > limit:
        dropped = [t.name for t in selected[limit:]]
        logger.warning("Robot '%s': %d tools exceed max_tools (%d); dropping %s",
                       robot.name, len(selected), limit, ", ".join(dropped))
        selected = selected[:limit]
    return selected


def resolve_mcp(robot_value: Any, mcp: Any, network_config: RunConfig | None) -> list[Any]:
    """The MCP servers a run needs, by the hierarchy run > robot (``robot_value``) > network > global."""
    if tool_config.is_none_value(mcp) and mcp is not None:
        return []
    at_build = tool_config.resolve_mcp(robot_value, parent_value=_parent(network_config, "mcp"))
    return tool_config.resolve_mcp("none" if mcp is None else mcp, parent_value=at_build)


def describe(robot: Robot) -> dict[str, Any]:
    """``robot.to_dict()``: a description of the robot (unset values omitted)."""
    data: dict[str, Any] = {
        "name": robot.name,
        "description": robot.description,
        "template": robot.template,
        "skills": robot.skills or None,
        "system_prompt": robot.system_prompt,
        "local_tools": [t.name for t in robot.local_tools] or None,
        "mcp_config": robot.config.mcp,
        "tools_config": robot.config.tools,
        "mcp_servers": robot.mcp_servers or None,
        "model": robot.model,
        "config": robot.config.to_json_dict() or None,
        "bus": True if robot.bus is not None else None,
    }
    return {k: v for k, v in data.items() if v is not None}
