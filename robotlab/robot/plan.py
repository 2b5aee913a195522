"""A run planned once: :func:`plan_run` resolves a robot's settings and a run's options into a :class:`RunPlan`.

Everything a run decides before it starts is decided here, by pure functions of what they are given
(the robot's :class:`~robotlab.run_config.RunConfig`, the run's :class:`RunOptions`, the network's config
and the global settings): the model (explicit, template, configured, provider default), the LLM parameters
of each request, the MCP servers the run needs and the tools it sends (both by the hierarchy
run > robot > network > global), the callbacks and the limits. The plan makes the
:class:`~robotlab.robot.request.RunRequest` once the robot's MCP tools are known.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import tool_config
from ..llm import LLM, AutoLLM, LLMClient
from ..templates import LLM_FIELDS
from .request import RunCallbacks, RunRequest

if TYPE_CHECKING:
    from .._settings import Config
    from ..attachments import Attachment
    from ..budget import Budget, SharedBudget
    from ..hooks import Hook
    from ..network import Network
    from ..run_config import RunConfig
    from ..streaming import Event, EventEmitter
    from ..task import Task
    from ..tools import Tool
    from .conversation import Conversation
    from .options import MCPSetting, ToolsSetting
    from .request import ContentCallback

__all__ = ["DEFAULT_MAX_TOOLS", "RunOptions", "RunPlan", "ToolChoice", "default_llm", "effective_settings",
           "llm_params", "plan_run", "resolve_mcp", "resolve_model", "resolve_tool_choice", "setting"]

logger = logging.getLogger("robotlab")

#: The most tools sent to the model in one request; extra tools are dropped with a warning.
DEFAULT_MAX_TOOLS = 128


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What one call of ``Robot.arun`` asks for besides its message (see :meth:`Robot.arun <robotlab.Robot.arun>`).

    Attributes:
        tools: This run's level of the tools hierarchy.
        mcp: This run's level of the MCP hierarchy.
        network: The network running the robot, if any.
        task: The network's task running the robot, if any.
        network_config: The network's settings (the parent level of the hierarchies); ``network.config``
            when unset.
        on_content: A text callback for this run, after the robot's own.
        on_event: Receives every event of the run.
        run_id: The id the run's events carry (random when unset).
        hooks: Hook classes active for this run only.
        budgets: Shared (network) budgets this run also counts against.
        attachments: Files sent with the message (as given; coerced when the run starts).
        deps: What the run's tools get as ``RunContext.deps``.
    """

    tools: ToolsSetting = "inherit"
    mcp: MCPSetting = "inherit"
    network: Network | None = None
    task: Task | None = None
    network_config: RunConfig | None = None
    on_content: ContentCallback | None = None
    on_event: Callable[[Event], object] | None = None
    run_id: str | None = None
    hooks: type[Hook] | Sequence[type[Hook]] | None = None
    budgets: Sequence[SharedBudget] = ()
    attachments: object = None
    deps: object = None

    @property
    def parent_config(self) -> RunConfig | None:
        """The config a level ``"inherit"`` reads: ``network_config``, else the network's."""
        if self.network_config is None and self.network is not None:
            config: RunConfig | None = getattr(self.network, "config", None)
            return config
        return self.network_config


def setting(config: RunConfig, key: str) -> Any:
    """The robot's ``mcp`` or ``tools`` setting, ``"none"`` when unset."""
    value = config.get(key)
    return value if value is not None else "none"


def _parent(network_config: RunConfig | None, key: str, defaults: Config) -> Any:
    value = network_config.get(key) if network_config is not None else None
    return value if value is not None else getattr(defaults, key)


def resolve_model(config: RunConfig, provider: str | None, defaults: Config) -> str | None:
    """The model: ``config``'s, else the configured default; a bare name is prefixed with ``provider``."""
    model = config.model or defaults.default_model()
    if model and provider and "/" not in model:
        model = f"{provider}/{model}"
    return model


def default_llm(defaults: Config) -> LLM:
    """The transport ``llm_transport`` picks per model, with the configured connection.

    That is :class:`~robotlab.llm.transport.AutoLLM` (the direct client or litellm): a robot's ``llm`` when
    none was given.
    """
    settings = defaults.llm
    return AutoLLM(api_base=settings.api_base, api_key=settings.api_key, timeout=settings.request_timeout,
                   num_retries=settings.max_retries)


def llm_params(config: RunConfig, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The LLM parameters of each request: ``config``'s set LLM fields, then ``extra`` (``with_params``)."""
    params = {k: config.get(k) for k in LLM_FIELDS if k != "model" and config.get(k) is not None}
    params.update(extra)
    return params


def effective_settings(config: RunConfig, model: str | None) -> dict[str, Any]:
    """The set LLM, tools and limit settings, with the resolved ``model``."""
    keys = (*LLM_FIELDS, "tools", "mcp", "max_tool_rounds", "doom_loop_threshold", "auto_compact",
            "compact_threshold", "token_budget", "cost_budget")
    values = {k: config.get(k) for k in keys}
    values["model"] = model
    return {k: v for k, v in values.items() if v is not None}


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """Which of a robot's tools a run sends: an allowlist (empty: every tool) and the most to send."""

    allowed: tuple[str, ...] = ()
    limit: int = DEFAULT_MAX_TOOLS
    none: bool = False
    """The run sends no tools at all (an explicit ``"none"`` on the run)."""

    def select(self, available: Sequence[Tool], *, robot_name: str) -> list[Tool]:
        """The tools of ``available`` this choice sends; the ones over :attr:`limit` are dropped with a warning."""
        if self.none:
            return []
        selected = list(available) if not self.allowed else tool_config.filter_tools(available,
                                                                                     allowed_names=self.allowed)
        if len(selected) > self.limit:
            dropped = [t.name for t in selected[self.limit:]]
            logger.warning("Robot '%s': %d tools exceed max_tools (%d); dropping %s",
                           robot_name, len(selected), self.limit, ", ".join(dropped))
            selected = selected[:self.limit]
        return selected


def resolve_tool_choice(config: RunConfig, tools: ToolsSetting, network_config: RunConfig | None,
                        defaults: Config) -> ToolChoice:
    """The tools a run sends, by the hierarchy run (``tools``) > robot (``config``) > network > global."""
    if tools is None:  # the default: the robot's own setting
        tools = "inherit"
    if tool_config.is_none_value(tools):
        return ToolChoice(none=True)
    at_build = tool_config.resolve_tools(setting(config, "tools"), parent_value=_parent(network_config, "tools",
                                                                                         defaults))
    allowed = tool_config.resolve_tools(tools, parent_value=at_build)
    limit = config.max_tools
    return ToolChoice(allowed=tuple(allowed),
                      limit=limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_TOOLS)


def resolve_mcp(robot_value: MCPSetting, mcp: MCPSetting, network_config: RunConfig | None,
                defaults: Config) -> list[Any]:
    """The MCP servers a run needs, by the hierarchy run (``mcp``) > robot (``robot_value``) > network > global."""
    if tool_config.is_none_value(mcp) and mcp is not None:
        return []
    at_build = tool_config.resolve_mcp(robot_value, parent_value=_parent(network_config, "mcp", defaults))
    return tool_config.resolve_mcp("none" if mcp is None else mcp, parent_value=at_build)


@dataclass(frozen=True)
class RunPlan:
    """What a run was resolved to before it starts (see :func:`plan_run`)."""

    robot_name: str
    model: str | None
    llm: LLM
    params: dict[str, Any]
    mcp_servers: list[Any]
    tools: ToolChoice
    callbacks: RunCallbacks = field(default_factory=RunCallbacks)
    max_tool_rounds: int | None = None
    doom_loop_threshold: int | None = None

    def request(self, text: str | None, conversation: Conversation, *, available_tools: Sequence[Tool],
                budget: Budget, emitter: EventEmitter | None = None, shared_budgets: Sequence[SharedBudget] = (),
                attachments: Sequence[Attachment] = ()) -> RunRequest:
        """The run loop's request: this plan with the run's message, conversation, budgets and stream.

        Args:
            text: The user's message (``None`` continues the conversation).
            conversation: The history the run extends.
            available_tools: The robot's tools now (its own and its MCP servers'); the plan chooses among them.
            budget: The robot's budget.
            emitter: Where the run's events go, if anywhere.
            shared_budgets: Shared (network) budgets the run also counts against.
            attachments: Files sent with the message.
        """
        return RunRequest(
            robot_name=self.robot_name, conversation=conversation, request_text=text, llm=self.llm,
            model=self.model, params=dict(self.params), tools=self.tools.select(available_tools,
                                                                                robot_name=self.robot_name),
            budget=budget, callbacks=self.callbacks, emitter=emitter, max_tool_rounds=self.max_tool_rounds,
            doom_loop_threshold=self.doom_loop_threshold, shared_budgets=list(shared_budgets),
            attachments=attachments)


def plan_run(config: RunConfig, options: RunOptions, *, robot_name: str, provider: str | None, llm: LLM,
             extra_params: Mapping[str, Any], callbacks: RunCallbacks, defaults: Config) -> RunPlan:
    """Resolve model, tools, MCP servers, callbacks and limits of one run of a robot.

    Args:
        config: The robot's settings.
        options: The run's options (its levels of the tools and MCP hierarchies, its ``on_content``, its
            network's config).
        robot_name: The robot's name.
        provider: The robot's provider (the prefix of a bare model name).
        llm: Where the run's requests go.
        extra_params: LLM parameters added with ``with_params``.
        callbacks: The robot's own callbacks.
        defaults: The global settings (:func:`robotlab.get_config`).

    Raises:
        ConfigurationError: no model is set anywhere and ``llm`` is a real transport.
    """
    model = resolve_model(config, provider, defaults)
    if model is None and isinstance(llm, LLMClient | AutoLLM):
        defaults.require_model()
    parent = options.parent_config
    max_tool_rounds = config.max_tool_rounds
    return RunPlan(
        robot_name=robot_name,
        model=model,
        llm=llm,
        params=llm_params(config, extra_params),
        mcp_servers=resolve_mcp(setting(config, "mcp"), options.mcp, parent, defaults),
        tools=resolve_tool_choice(config, options.tools, parent, defaults),
        callbacks=callbacks.with_content(options.on_content),
        max_tool_rounds=max_tool_rounds if max_tool_rounds is not None else defaults.max_tool_rounds,
        doom_loop_threshold=config.doom_loop_threshold,
    )
