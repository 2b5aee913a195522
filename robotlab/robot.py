"""Robot: an LLM agent with instructions, tools, a chat history and safety limits.

A robot keeps one conversation: every ``run`` adds to its history until
:meth:`Robot.clear_messages`. ``run`` / ``arun`` return a :class:`~robotlab.RobotResult`;
``stream`` / ``astream`` yield :class:`~robotlab.streaming.Event` objects as the run goes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import streaming, tool_config
from ._hooking import Hooking
from ._loop import RunState, raise_budget
from ._runtime import run_sync
from .budget import Ledger
from .bus import BusMessaging
from .config import get_config
from .errors import ConfigurationError
from .llm import LLM, LLMClient
from .llm.transport import AutoLLM
from .mcp.management import MCPManagement
from .result import RobotResult
from .run_config import RunConfig
from .runnable import Runnable
from .streaming import Chunk, Event, EventEmitter
from .templates import LLM_FIELDS, Template
from .tools import FunctionTool, Tool
from .tools.manifest import tool_registry

if TYPE_CHECKING:
    from .agent_skill import AgentSkill, AgentSkillCatalog
    from .hooks import RunHookContext
    from .memory import Memory
    from .task import FlowResult

__all__ = ["DEFAULT_MAX_TOOLS", "Robot", "build"]

logger = logging.getLogger("robotlab")

#: The most tools sent to the model in one request; extra tools are dropped with a warning.
DEFAULT_MAX_TOOLS = 128

ContentCallback = Callable[[Chunk], Any]


def _coerce_tool(item: Any, robot: Robot) -> Tool:
    if isinstance(item, Tool):
        return item
    if isinstance(item, type) and issubclass(item, Tool):
        return item(robot=robot)
    if callable(item):
        return FunctionTool(item)
    raise ConfigurationError(
        f"Robot '{robot.name}': local_tools entries must be Tool instances, Tool subclasses or functions, got {item!r}"
    )


def _skill_ids(metadata: Mapping[str, Any]) -> list[str]:
    value = metadata.get("skills")
    return [str(value)] if isinstance(value, str) else [str(s) for s in value or []]


def _validate_tools_filter(value: Any) -> None:
    if value is None or isinstance(value, str):
        return
    for entry in value if isinstance(value, list | tuple) else [value]:
        if not isinstance(entry, str):
            raise ConfigurationError(
                f"tools= takes tool names (or 'none'/'inherit'), got {entry!r}; attach tool objects with local_tools="
            )


class Robot(Runnable, BusMessaging, Hooking, MCPManagement):
    """An LLM agent. Build one with :func:`robotlab.build`; every option is keyword-only.

    Args:
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
            by default the transport the ``llm_transport`` setting picks for the model
            (:class:`~robotlab.llm.transport.AutoLLM`: the direct client or litellm).
        mcp_servers: MCP server configurations for this robot.
        mcp: ``"none"``, ``"inherit"`` or a list of servers (the MCP hierarchy).
        tools: ``"none"``, ``"inherit"`` or a list of tool names (the tools hierarchy).
        on_tool_call: Called with each :class:`~robotlab._loop.ToolCall` before it runs.
        on_tool_result: Called with each tool's return value.
        on_content: Called with each streamed :class:`~robotlab.streaming.Chunk` of text.
        skills: Skill ids. An id found in the :class:`~robotlab.agent_skill.AgentSkillCatalog` is an
            AgentSkill, matched to each run's message; any other id is a template whose body goes before
            the template's (see :mod:`robotlab.agent_skill` and the templates guide).
        temperature, top_p, top_k, max_tokens, presence_penalty, frequency_penalty, stop: LLM parameters.
        max_tool_rounds: Tool calls allowed per run before :class:`ToolLoopError`.
        token_budget: Total tokens (input + output, all runs) before :class:`InferenceError`.
        cost_budget: Total cost in USD before :class:`InferenceError`.
        doom_loop_threshold: Repetitions before the doom-loop warning (default 3).
        config: A :class:`RunConfig` (or dict) under the explicit options.
    """

    def __init__(
        self,
        *,
        name: str = "robot",
        template: str | None = None,
        system_prompt: str | None = None,
        context: Mapping[str, Any] | Callable[..., Mapping[str, Any]] | None = None,
        description: str | None = None,
        local_tools: Sequence[Any] | Any = (),
        model: str | None = None,
        provider: str | None = None,
        llm: LLM | None = None,
        mcp_servers: Sequence[Any] = (),
        mcp: Any = "none",
        tools: Any = "none",
        on_tool_call: Callable[..., Any] | None = None,
        on_tool_result: Callable[..., Any] | None = None,
        on_content: ContentCallback | None = None,
        enable_cache: bool = True,
        bus: Any = None,
        skills: Sequence[str] | str | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        max_tokens: int | None = None,
        presence_penalty: float | None = None,
        frequency_penalty: float | None = None,
        stop: str | Sequence[str] | None = None,
        max_tool_rounds: int | None = None,
        token_budget: int | None = None,
        cost_budget: float | None = None,
        doom_loop_threshold: int | None = None,
        mcp_discovery: bool = False,
        config: RunConfig | Mapping[str, Any] | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            valid = ", ".join(
                sorted(p for p in inspect.signature(Robot.__init__).parameters if p not in {"self", "unknown"})
            )
            raise ConfigurationError(f"Unknown robot option(s): {', '.join(sorted(unknown))}. Valid options: {valid}")
        _validate_tools_filter(tools)
        self.name = str(name)
        self.description = description
        self.template = template
        self.system_prompt = system_prompt
        self.provider = provider
        self.skills = [str(s) for s in ([skills] if isinstance(skills, str) else list(skills or []))]
        self.agent_skills: list[AgentSkill] = []  # pending AgentSkills, matched to each run's message
        self._skill_catalog: AgentSkillCatalog | None = None
        self._skill_templates: list[Template] | None = None  # template skills, expanded depth first
        self._skill_runs = 0  # runs in progress with AgentSkills injected, and the instructions before them
        self._skill_base: str | None = None
        self._template_pending = False
        self.mcp_discovery = mcp_discovery
        self.bus = bus
        self.input: Any = None
        self.ask_channel: Any = None  # a robotlab.ask.AskChannel; AskUser falls back to the terminal
        self.output: Any = None
        self._llm = llm
        self._context = context
        self.total_input_tokens = 0
        self.total_output_tokens = 0
        self._messages: list[dict[str, Any]] = []
        self._instructions: str | None = None
        self._template_obj: Template | None = None
        self._tool_call_callbacks: list[Callable[..., Any]] = [on_tool_call] if on_tool_call else []
        self._tool_result_callbacks: list[Callable[..., Any]] = [on_tool_result] if on_tool_result else []
        self._content_callbacks: list[ContentCallback] = [on_content] if on_content else []
        self._params: dict[str, Any] = {}
        self.mcp_servers = list(mcp_servers)
        self.mcp_clients: dict[str, Any] = {}
        self.mcp_tools: list[Tool] = []

        explicit = {
            "model": model,
            "temperature": temperature,
            "top_p": top_p,
            "top_k": top_k,
            "max_tokens": max_tokens,
            "presence_penalty": presence_penalty,
            "frequency_penalty": frequency_penalty,
            "stop": stop,
            "max_tool_rounds": max_tool_rounds,
            "token_budget": token_budget,
            "cost_budget": cost_budget,
            "doom_loop_threshold": doom_loop_threshold,
            "enable_cache": enable_cache,
        }
        effective = RunConfig(**explicit)
        mcp_value = self.mcp_servers if self.mcp_servers else mcp
        if not tool_config.is_none_value(mcp_value):
            effective.set("mcp", mcp_value)
        if not tool_config.is_none_value(tools):
            effective.set("tools", tools)
        base = config if isinstance(config, RunConfig) else RunConfig(**dict(config or {}))
        self.config = base.merge(effective)
        self.local_tools: list[Tool] = [
            _coerce_tool(t, self) for t in (local_tools if isinstance(local_tools, list | tuple) else [local_tools])
        ]
        for local in self.local_tools:
            tool_registry.register(local)
        self._memory: Memory | None = None
        self._enable_cache = enable_cache
        self._run_memory: Memory | None = None
        self._apply_template()
        self.budget_ledger: Ledger | None = None
        limits = {
            k: v for k, v in (("tokens", self.config.token_budget), ("cost", self.config.cost_budget)) if v is not None
        }
        if limits:
            self.budget_ledger = Ledger(limits=limits)
        self._init_hooking()
        self._init_bus_messaging()  # last: joins bus= under the final name

    # -- memory --------------------------------------------------------------------------
    @property
    def memory(self) -> Memory:
        """The robot's own memory (created on first use)."""
        if self._memory is None:
            from .memory import Memory

            self._memory = Memory(enable_cache=self._enable_cache)
        return self._memory

    @property
    def run_memory(self) -> Memory:
        """The memory of the run in progress (the network's when run in one), else :attr:`memory`."""
        return self._run_memory if self._run_memory is not None else self.memory

    def reset_memory(self) -> Robot:
        """Clear the robot's own memory."""
        self.memory.reset()
        return self

    # -- configuration -------------------------------------------------------------------
    @property
    def mcp_config(self) -> Any:
        """The robot's MCP setting (``"none"`` when unset)."""
        return self.config.mcp if self.config.mcp is not None else "none"

    @property
    def tools_config(self) -> Any:
        """The robot's tools setting (``"none"`` when unset)."""
        return self.config.tools if self.config.tools is not None else "none"

    def _template_context(self) -> dict[str, Any]:
        context = self._context
        if callable(context):
            context = context()
        return dict(context or {})

    def _apply_template(self, run_context: Mapping[str, Any] | None = None) -> None:
        parts: list[str] = []
        if self.template and self._template_obj is None:
            self._template_obj = Template.load(self.template, get_config().template_path)
            self.skills += [s for s in _skill_ids(self._template_obj.metadata) if s not in self.skills]
            self._skill_templates = None
        if self._skill_templates is None:
            self._expand_skills()
            self._apply_front_matter([*(self._skill_templates or []), *([self._template_obj] if self.template
                                                                         and self._template_obj else [])])
        values = {**self._template_context(), **(run_context or {})}
        for skill in self._skill_templates or []:  # a skill missing parameters is left out, like RobotLab's
            if not skill.missing({**{k: v for k, v in skill.parameters.items() if v is not None}, **values}):
                parts.append(skill.render(values))
        self._template_pending = False
        if self.template and self._template_obj is not None:
            if run_context is not None or not self._template_obj.missing(
                {**{k: v for k, v in self._template_obj.parameters.items() if v is not None}, **values}
            ):
                parts.append(self._template_obj.render(values))
            else:
                self._template_pending = True
        if self.system_prompt:
            parts.append(self.system_prompt)
        self._instructions = "\n\n".join(parts) if parts else None

    def _expand_skills(self) -> None:
        """Split :attr:`skills` into AgentSkills (found in the catalog) and template skills, depth first."""
        self.agent_skills, self._skill_templates = [], []
        if not self.skills:
            return
        from .agent_skill import AgentSkillCatalog

        catalog = self._skill_catalog = AgentSkillCatalog.instance()
        template_path = get_config().template_path
        visited = {str(self.template)} if self.template else set()
        templates: list[Template] = []

        def expand(ids: list[str]) -> None:
            for skill_id in ids:
                if skill_id in visited:
                    logger.warning("Robot '%s': skill cycle detected at '%s', skipping", self.name, skill_id)
                    continue
                visited.add(skill_id)
                agent_skill = catalog.find(skill_id)
                if agent_skill is not None:
                    self.agent_skills.append(agent_skill)
                    continue
                template = Template.load(skill_id, template_path)
                expand(_skill_ids(template.metadata))  # nested skills first
                templates.append(template)

        expand(list(self.skills))
        self._skill_templates = templates

    def _apply_front_matter(self, templates: Sequence[Template]) -> None:
        """Skill templates' then the template's front matter, the last one winning; the constructor wins."""
        front = RunConfig()
        extras: dict[str, str] = {}
        for template in templates:
            front = front.merge(RunConfig.from_front_matter(template.metadata))
            extras.update({k: str(template.metadata[k]) for k in ("robot_name", "description")
                           if template.metadata.get(k)})
        if not tool_config.is_none_value(self.mcp_config):
            front.set("mcp", None)
        self.config = front.merge(self.config)
        if extras.get("robot_name") and self.name == "robot":
            self.name = extras["robot_name"]
        if extras.get("description") and self.description is None:
            self.description = extras["description"]

    async def _inject_agent_skills(self, message: Any) -> list[Tool] | None:
        """Match the pending AgentSkills to ``message``; prepend the matches' instructions and add their
        script tools. Returns the tools added (for :meth:`_restore_agent_skills`), ``None`` when nothing matched.

        Overlapping runs of one robot all restore the instructions from before the first of them.
        """
        if not self.agent_skills or self._skill_catalog is None:
            return None
        try:
            matched = await asyncio.to_thread(
                self._skill_catalog.match, "" if message is None else str(message), self.agent_skills
            )
        except Exception as exc:
            logger.warning("Robot '%s': AgentSkill embedding failed: %s", self.name, exc)
            return None
        if not matched:
            return None
        if self._skill_runs == 0:
            self._skill_base = self._instructions
        self._skill_runs += 1
        skill_text = "\n\n".join(skill.instructions for skill in matched)
        self._instructions = "\n\n".join(part for part in (skill_text, self._skill_base or "") if part) or None
        added: list[Tool] = [tool for skill in matched for tool in skill.script_tools]
        self.local_tools.extend(added)
        return added

    def _restore_agent_skills(self, added: list[Tool] | None) -> None:
        if added is None:
            return
        for tool in added:  # one occurrence each: an overlapping run may have added the same tool
            index = next((i for i, t in enumerate(self.local_tools) if t is tool), None)
            if index is not None:
                del self.local_tools[index]
        self._skill_runs -= 1
        if self._skill_runs == 0:
            self._instructions = self._skill_base

    @property
    def model(self) -> str | None:
        """The model this robot uses (explicit, template, configured, or a provider default)."""
        model = self.config.model or get_config().default_model()
        if model and self.provider and "/" not in model:
            model = f"{self.provider}/{model}"
        return model

    @property
    def llm(self) -> LLM:
        """Where requests go: the ``llm=`` given, else the transport ``llm_transport`` picks per model
        (:class:`~robotlab.llm.transport.AutoLLM`) with the configured connection."""
        if self._llm is None:
            settings = get_config().llm
            self._llm = AutoLLM(
                api_base=settings.api_base,
                api_key=settings.api_key,
                timeout=settings.request_timeout,
                num_retries=settings.max_retries,
            )
        return self._llm

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        """Send this robot's requests to ``value`` from now on (``None``: litellm, as when built without one).

        Wrappers use it: ``robot.llm = Recording(robot.llm)`` sees every request of later runs.
        """
        self._llm = value

    @property
    def instructions(self) -> str | None:
        """The system prompt sent with every request (template, then ``system_prompt``)."""
        return self._instructions

    @property
    def effective_config(self) -> dict[str, Any]:
        """The robot's set LLM, tools and limit settings."""
        keys = (
            *LLM_FIELDS,
            "tools",
            "mcp",
            "max_tool_rounds",
            "doom_loop_threshold",
            "auto_compact",
            "compact_threshold",
            "token_budget",
            "cost_budget",
        )
        values = {k: self.config.get(k) for k in keys}
        values["model"] = self.model
        return {k: v for k, v in values.items() if v is not None}

    def _llm_params(self) -> dict[str, Any]:
        params = {k: self.config.get(k) for k in LLM_FIELDS if k != "model" and self.config.get(k) is not None}
        params.update(self._params)
        return params

    # -- chat history --------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (OpenAI-format dicts), without the system prompt."""
        return list(self._messages)

    def _request_messages(self) -> list[dict[str, Any]]:
        if self._instructions:
            return [{"role": "system", "content": self._instructions}, *self._messages]
        return list(self._messages)

    def clear_messages(self, *, keep_system: bool = True) -> Robot:
        """Forget the conversation; ``keep_system=False`` also drops the instructions."""
        self._messages.clear()
        if not keep_system:
            self._instructions = None
        return self

    def replace_messages(self, messages: Sequence[Mapping[str, Any] | Any]) -> Robot:
        """Replace the conversation (for example with one loaded from a database).

        Each entry is an OpenAI-format dict or an object with ``role`` and ``content``;
        system entries set the instructions.
        """
        converted: list[dict[str, Any]] = []
        for message in messages:
            item = (
                dict(message)
                if isinstance(message, Mapping)
                else {"role": str(getattr(message, "role", "user")), "content": getattr(message, "content", None)}
            )
            if item.get("role") not in {"system", "user", "assistant", "tool"}:
                raise ConfigurationError(f"replace_messages: invalid role {item.get('role')!r} in {item!r}")
            if item["role"] == "system":
                self._instructions = str(item.get("content") or "") or None
            else:
                converted.append(item)
        self._messages[:] = converted
        return self

    def reset_token_totals(self) -> Robot:
        """Zero ``total_input_tokens`` and ``total_output_tokens`` (the budget ledger is kept)."""
        self.total_input_tokens = 0
        self.total_output_tokens = 0
        return self

    # -- tools ---------------------------------------------------------------------------
    @property
    def all_tools(self) -> list[Tool]:
        """Local tools and the tools discovered on MCP servers."""
        return [*self.local_tools, *self.mcp_tools]

    def resolve_tools(self, tools: Any = "inherit", *, network_config: RunConfig | None = None) -> list[Tool]:
        """The tools a run sends, by the hierarchy run > robot > network > global."""
        if tools is None:  # the default: the robot's own setting
            tools = "inherit"
        if tool_config.is_none_value(tools):
            return []
        parent = (
            network_config.tools
            if network_config is not None and network_config.tools is not None
            else get_config().tools
        )
        at_build = tool_config.resolve_tools(self.tools_config, parent_value=parent)
        allowed = tool_config.resolve_tools("none" if tools is None else tools, parent_value=at_build)
        available = self.all_tools
        selected = available if not allowed else tool_config.filter_tools(available, allowed_names=allowed)
        limit = self.config.max_tools
        limit = limit if isinstance(limit, int) and limit > 0 else DEFAULT_MAX_TOOLS
        if len(selected) > limit:
            dropped = [t.name for t in selected[limit:]]
            logger.warning(
                "Robot '%s': %d tools exceed max_tools (%d); dropping %s",
                self.name,
                len(selected),
                limit,
                ", ".join(dropped),
            )
            selected = selected[:limit]
        return selected

    def resolve_mcp(self, mcp: Any = "inherit", *, network_config: RunConfig | None = None) -> list[Any]:
        """The MCP servers a run needs, by the hierarchy run > robot > network > global."""
        if tool_config.is_none_value(mcp) and mcp is not None:
            return []
        parent = network_config.mcp if network_config is not None and network_config.mcp is not None \
            else get_config().mcp
        at_build = tool_config.resolve_mcp(self.mcp_config, parent_value=parent)
        return tool_config.resolve_mcp("none" if mcp is None else mcp, parent_value=at_build)

    async def _prepare_mcp(self, mcp: Any, *, network_config: RunConfig | None, message: str | None) -> None:
        """Connect the MCP servers this run needs (see :mod:`robotlab.mcp`); a no-op without servers."""
        servers = self.resolve_mcp(mcp, network_config=network_config)
        if servers:
            await self._connect_mcp_servers(servers, message=message)

    async def _invoke_tool(self, tool: Tool, arguments: str) -> Any:
        return await tool.acall(arguments)

    # -- budgets -------------------------------------------------------------------------
    def _check_budgets(self, run_cost: float) -> None:
        token_budget = self.config.token_budget
        if token_budget is not None:
            used = self.total_input_tokens + self.total_output_tokens
            if used > token_budget:
                raise_budget("tokens", used, token_budget)
        cost_budget = self.config.cost_budget
        if cost_budget is not None and self.budget_ledger is not None:
            used_cost = self.budget_ledger.consumed["cost"] + run_cost
            if used_cost > cost_budget:
                raise_budget("cost", used_cost, cost_budget)

    # -- running -------------------------------------------------------------------------
    async def arun(
        self,
        message: Any = None,
        *,
        tools: Any = "inherit",
        mcp: Any = "inherit",
        network: Any = None,
        task: Any = None,
        network_memory: Memory | None = None,
        network_config: RunConfig | None = None,
        memory: Memory | Mapping[str, Any] | None = None,
        on_content: ContentCallback | None = None,
        on_event: Callable[[Event], Any] | None = None,
        run_id: str | None = None,
        hooks: Any = None,
        **template_context: Any,
    ) -> RobotResult:
        """Send ``message`` and run the tool loop until the model answers.

        Args:
            message: The user's message (any object; ``str()`` is sent). ``None`` continues.
            tools: ``"inherit"`` (the robot's tools), ``"none"``, or a list of tool names.
            mcp: ``"inherit"``, ``"none"``, or a list of MCP servers.
            network: The :class:`~robotlab.Network` running this robot, if any.
            task: The network's task running this robot, if any.
            network_memory: The memory shared by the network (defaults to ``network.memory``).
            network_config: The network's :class:`RunConfig` (tools/MCP parents).
            memory: A :class:`~robotlab.memory.Memory` to use for this run instead, or a dict of
                values to ``set`` into the run's memory first.
            on_content: A per-call text callback, called after the robot's own.
            on_event: Receives every :class:`~robotlab.streaming.Event` of the run.
            run_id: The id carried by events (random by default).
            hooks: :class:`~robotlab.Hook` subclasses (one or a list) active for this run only.
            template_context: Template parameters for this run; an error when the robot has no template.
        """
        if template_context:
            if not self.template and not self._skill_templates:
                raise ConfigurationError(
                    f"Unknown run option(s): {', '.join(sorted(template_context))}. Keyword arguments of run() are "
                    f"template parameters, and robot '{self.name}' has no template."
                )
            self._apply_template(template_context)
        elif self.template and self._template_obj is not None and (self._instructions is None
                                                                    or self._template_pending):
            self._apply_template({})
        run_memory = network_memory or getattr(network, "memory", None) or self.memory
        if memory is not None and not isinstance(memory, Mapping):
            run_memory = memory
        elif memory:
            run_memory.merge(memory)
        if network_config is None and network is not None:
            network_config = getattr(network, "config", None)
        previous_writer, previous_memory = run_memory.current_writer, self._run_memory
        run_memory.current_writer = self.name
        self._run_memory = run_memory
        injected = await self._inject_agent_skills(message)
        try:
            return await self._run_hooked(
                message, network=network, task=task, memory=run_memory, per_run_hooks=hooks,
                execute=lambda ctx: self._execute(ctx.request, tools=tools, mcp=mcp, network_config=network_config,
                                                  on_content=on_content, on_event=on_event, run_id=run_id,
                                                  run_context=ctx),
            )
        finally:
            run_memory.current_writer = previous_writer
            self._run_memory = previous_memory
            self._restore_agent_skills(injected)

    async def _execute(self, message: Any, *, tools: Any, mcp: Any, network_config: RunConfig | None,
                       on_content: ContentCallback | None, on_event: Callable[[Event], Any] | None,
                       run_id: str | None, run_context: RunHookContext | None = None) -> RobotResult:
        emitter = EventEmitter(on_event, run_id=run_id) if on_event is not None else None
        callbacks = [*self._content_callbacks, *([on_content] if on_content else [])]
        text = None if message is None else str(message)
        model = self.model
        if model is None and isinstance(self.llm, LLMClient | AutoLLM):
            get_config().require_model()
        await self._prepare_mcp(mcp, network_config=network_config, message=text)
        selected = self.resolve_tools(tools, network_config=network_config)
        reservations = self._reserve_budget()
        state = RunState(
            robot=self,
            request_text=text,
            tools=selected,
            model=model,
            params=self._llm_params(),
            content_callbacks=callbacks,
            emitter=emitter,
            max_tool_rounds=self.config.max_tool_rounds
            if self.config.max_tool_rounds is not None
            else get_config().max_tool_rounds,
            doom_loop_threshold=self.config.doom_loop_threshold,
        )
        if emitter is not None:
            emitter.emit(streaming.RUN_STARTED, robot=self.name, message=text)
        try:
            with streaming.emitting(emitter):  # tools (AskUser's channel) add events to this run's stream
                result = await self._generate(state, run_context)
        except BaseException as exc:
            if emitter is not None:
                emitter.emit(streaming.RUN_FAILED, robot=self.name, error=str(exc), error_type=type(exc).__name__)
                emitter.emit(streaming.STREAM_ENDED)
            raise
        finally:
            self._reconcile_budget(reservations, state)
        if emitter is not None:
            emitter.emit(
                streaming.RUN_COMPLETED,
                robot=self.name,
                reply=result.reply,
                stop_reason=result.stop_reason,
                input_tokens=result.input_tokens,
                output_tokens=result.output_tokens,
                cost=result.cost,
            )
            emitter.emit(streaming.STREAM_ENDED)
        return result

    def run(self, message: Any = None, **options: Any) -> RobotResult:
        """Synchronous :meth:`arun` (runs on RobotLab's background event loop)."""
        return run_sync(self.arun(message, **options))

    async def call(self, result: FlowResult) -> FlowResult:
        """The network step: run on a :class:`~robotlab.task.FlowResult` and return the next one.

        The message is the result's value (an upstream robot's reply) or the run's message; extra run
        parameters are template parameters. Returns ``result.with_context(self.name, robot_result)
        .continue_(robot_result)``; an exception becomes the reply ``"Error: <ClassName>: <message>"``.
        Override it to route: ``return (await super().call(result)).activate("billing")``.
        """
        from .task import run_robot_step

        return await run_robot_step(self, result)

    def _reserve_budget(self) -> dict[str, float]:
        if self.budget_ledger is None:
            return {}
        reservations: dict[str, float] = {}
        for key in self.budget_ledger.limits:
            amount = self.budget_ledger.remaining(key)
            self.budget_ledger.reserve(key, amount)
            reservations[key] = amount
        return reservations

    def _reconcile_budget(self, reservations: dict[str, float], state: RunState) -> None:
        if self.budget_ledger is None:
            return
        actual = {"tokens": state.input_tokens + state.output_tokens, "cost": state.cost}
        for key, reserved in reservations.items():
            self.budget_ledger.reconcile(key, reserved, actual.get(key, 0))

    # -- chaining ------------------------------------------------------------------------
    def with_model(self, model: str) -> Robot:
        """Use ``model`` from now on."""
        self.config.set("model", model)
        return self

    def with_temperature(self, temperature: float) -> Robot:
        """Set the temperature."""
        self.config.set("temperature", temperature)
        return self

    def with_instructions(self, instructions: str, *, replace: bool = True) -> Robot:
        """Set the system prompt (``replace=False`` appends to the current one)."""
        if replace or not self._instructions:
            self._instructions = instructions
        else:
            self._instructions = f"{self._instructions}\n\n{instructions}"
        return self

    def with_tool(self, tool: Any) -> Robot:
        """Attach one more tool."""
        self.local_tools.append(_coerce_tool(tool, self))
        return self

    def with_tools(self, *tools: Any, replace: bool = False) -> Robot:
        """Attach tools (``replace=True`` drops the current ones first)."""
        if replace:
            self.local_tools.clear()
        self.local_tools.extend(_coerce_tool(t, self) for t in tools)
        return self

    def with_params(self, **params: Any) -> Robot:
        """Pass extra LLM parameters on every request (``max_tokens``, ``seed``, ...)."""
        self._params.update(params)
        return self

    def with_headers(self, **headers: str) -> Robot:
        """Send extra HTTP headers to the provider."""
        self._params.setdefault("extra_headers", {}).update(headers)
        return self

    def with_schema(self, schema: Any) -> Robot:
        """Ask for structured output: a pydantic model class or a JSON schema dict."""
        self._params["response_format"] = schema
        return self

    def with_thinking(self, effort: str = "medium") -> Robot:
        """Ask reasoning models to think (litellm's ``reasoning_effort``)."""
        self._params["reasoning_effort"] = effort
        return self

    def with_context(self, **context: Any) -> Robot:
        """Merge template parameters and re-render the template."""
        self._context = {**self._template_context(), **context}
        self._apply_template({})
        return self

    def with_template(self, template: str, **context: Any) -> Robot:
        """Switch to another template (re-applies its front matter)."""
        self.template = template
        self._template_obj = None
        if context:
            self._context = {**self._template_context(), **context}
        self._apply_template()
        return self

    def on_content(self, callback: ContentCallback) -> ContentCallback:
        """Register another text callback (usable as a decorator)."""
        self._content_callbacks.append(callback)
        return callback

    def update(
        self,
        *,
        template: str | None = None,
        context: Mapping[str, Any] | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        temperature: float | None = None,
        **params: Any,
    ) -> Robot:
        """Change several settings at once; extra keywords become LLM parameters."""
        if context is not None:
            self._context = {**self._template_context(), **context}
        if system_prompt is not None:
            self.system_prompt = system_prompt
        if template is not None:
            self.with_template(template)
        else:
            self._apply_template()
        if model is not None:
            self.with_model(model)
        if temperature is not None:
            self.with_temperature(temperature)
        if params:
            self.with_params(**params)
        return self

    # -- introspection -------------------------------------------------------------------
    @property
    def crew(self) -> list[Robot]:
        """``[self]``: a robot is a crew of one."""
        return [self]

    def to_dict(self) -> dict[str, Any]:
        """A description of the robot (unset values omitted)."""
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "template": self.template,
            "skills": self.skills or None,
            "system_prompt": self.system_prompt,
            "local_tools": [t.name for t in self.local_tools] or None,
            "mcp_config": self.config.mcp,
            "tools_config": self.config.tools,
            "mcp_servers": self.mcp_servers or None,
            "model": self.model,
            "config": self.config.to_json_dict() or None,
            "bus": True if self.bus is not None else None,
        }
        return {k: v for k, v in data.items() if v is not None}

    def __repr__(self) -> str:
        return f"<Robot {self.name!r} model={self.model!r} tools={[t.name for t in self.local_tools]}>"


def build(**options: Any) -> Robot:
    """Build a :class:`Robot`; see its arguments. An unknown option raises :class:`ConfigurationError`."""
    return Robot(**options)
