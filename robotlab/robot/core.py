"""Robot: an LLM agent with instructions, tools, a chat history and safety limits.

A robot holds its configuration and its conversation, and has the parts that do the rest: a
:class:`~robotlab.robot.persona.Persona` (template, skills, system prompt) and its
:class:`~robotlab.robot.learnings.Learnings`, a :class:`~robotlab.robot.mailbox.Mailbox` (the message bus),
an :class:`~robotlab.mcp.MCPToolset` (its MCP servers), a :class:`~robotlab.hooks.HookRegistry` and a
:class:`~robotlab.budget.Budget`; its methods hand over to them. :mod:`robotlab.robot.run` runs it. A robot
keeps one conversation: every ``run`` adds to its history until :meth:`Robot.clear_messages`. ``run`` /
``arun`` return a :class:`~robotlab.RobotResult`; ``stream`` yields events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Unpack, cast, overload

from ..budget import Budget
from ..config import get_config
from ..hooks import HookRegistry
from ..mcp.management import MCPToolset
from ..runnable import Runnable
from ..task import run_robot_step
from . import delegating
from .chaining import Chaining
from .connections import Connections
from .conversation import Conversation
from .learnings import Learnings
from .mailbox import Mailbox
from .options import RobotKwargs, RobotOptions, coerce_tools
from .parts import Parts
from .persona import Persona
from .plan import (
    RunOptions,
    RunPlan,
    default_llm,
    effective_settings,
    llm_params,
    plan_run,
    resolve_model,
    resolve_tool_choice,
    setting,
)
from .run import choose_memory, run_robot

if TYPE_CHECKING:
    from ..budget import SharedBudget
    from ..delegation import DelegationFuture
    from ..hooks import Hook, Registration
    from ..llm import LLM
    from ..memory import Memory
    from ..network import Network
    from ..result import RobotResult
    from ..run_config import RunConfig
    from ..streaming import Chunk, Event
    from ..task import FlowResult, Task
    from ..text.history_search import HistoryResult
    from ..tools import Tool
    from .options import MCPSetting, ToolSource, ToolsSetting

__all__ = ["Robot", "build"]


class Robot(Parts, Chaining, Connections, Runnable["RobotResult"]):
    """An LLM agent. Build one with :func:`robotlab.build`; every option is keyword-only.

    The options are the fields of :class:`~robotlab.robot.options.RobotOptions` (``name``, ``template``,
    ``system_prompt``, ``local_tools``, ``model``, ``llm``, ``token_budget``, ...), which says what each
    means; :class:`~robotlab.robot.options.RobotKwargs` types them. A ready ``RobotOptions`` may be given as
    the one positional argument (keywords override its fields). An unknown option raises
    :class:`ConfigurationError`.
    """

    def __init__(self, options: RobotOptions | None = None, /, **kwargs: Unpack[RobotKwargs]) -> None:
        settings = RobotOptions.parse(kwargs, base=options)
        self.name = settings.name
        self.description = settings.description
        self.provider = settings.provider
        self.input: Any = None  # where the terminal AskUser reads answers (stdin when unset)
        self.output: Any = None  # where it writes questions (stdout when unset)
        self.ask_channel: Any = None  # a robotlab.tools.ask.AskChannel; AskUser falls back to the terminal
        self.approver: Any = None  # asked before an approve=True tool runs (robotlab.tools.approval); None: it runs
        self.config = settings.run_config()
        self.conversation = Conversation()
        self.persona = Persona(self, self.conversation, template=settings.template,
                               system_prompt=settings.system_prompt, context=settings.context, skills=settings.skills)
        self._callbacks = settings.run_callbacks()
        self.local_tools: list[Tool] = coerce_tools(settings.local_tools, self)
        self.mcp_servers = list(settings.mcp_servers)
        self.mcp = MCPToolset(self, local_tools=lambda: self.local_tools, discovery=settings.mcp_discovery)
        self.mcp.check(self.mcp_servers, setting(self.config, "mcp"))
        self.hooks = HookRegistry()
        self._options = settings
        self._llm = settings.llm
        self._params: dict[str, Any] = {}
        self._memory: Memory | None = None
        self._run_memory: Memory | None = None
        self._learned = Learnings(self)
        self._render()
        self.budget = Budget(robot_name=self.name, token_budget=self.config.token_budget,
                             cost_budget=self.config.cost_budget)
        self.mailbox = Mailbox(self, settings.bus)  # last: joins bus= under the final name
        self._prepare_first_call()

    def _prepare_first_call(self) -> None:
        """Load what a direct model's first run needs here, not in that run (:func:`~robotlab.llm.warmup.prepare`)."""
        from ..llm import warmup

        if warmup.prepared():
            return
        try:
            model = self.model
            if warmup.worth_preparing(model):
                warmup.prepare(model, self._llm if self._llm is not None else default_llm(get_config()))
        except Exception:  # a configuration its first run reports: preparing never fails a build
            return

    # -- memory ----------------------------------------------------------------------------
    @property
    def memory(self) -> Memory:
        """The robot's own memory (created on first use)."""
        if self._memory is None:
            self._memory = self._options.memory()
        return self._memory

    @property
    def run_memory(self) -> Memory:
        """The memory of the run in progress (the network's when run in one), else :attr:`memory`."""
        return self._run_memory if self._run_memory is not None else self.memory

    def reset_memory(self) -> Robot:
        """Clear the robot's own memory."""
        self.memory.reset()
        return self

    # -- configuration ---------------------------------------------------------------------
    @property
    def model(self) -> str | None:
        """The model this robot uses (explicit, template, configured, or a provider default)."""
        return resolve_model(self.config, self.provider, get_config())

    @property
    def llm(self) -> LLM:
        """Where requests go: the ``llm=`` given, else litellm with the configured connection."""
        if self._llm is None:
            self._llm = default_llm(get_config())
        return self._llm

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        """Send requests to ``value`` from now on (``None``: litellm); ``robot.llm = Recording(robot.llm)``."""
        self._llm = value

    @property
    def llm_params(self) -> dict[str, Any]:
        """The LLM parameters sent with every request (the set LLM settings, then :meth:`with_params`')."""
        return llm_params(self.config, self._params)

    @property
    def effective_config(self) -> dict[str, Any]:
        """The robot's set LLM, tools and limit settings."""
        return effective_settings(self.config, self.model)

    def _render(self, run_context: Mapping[str, Any] | None = None) -> None:
        """Render the instructions; apply the templates' front matter when they were (re)loaded."""
        front = self.persona.render(run_context)
        if front is None:
            return
        self.config = front.under(self.config)
        if front.robot_name and self.name == "robot":  # a template names only a robot left unnamed
            self.name = front.robot_name
        if front.description and self.description is None:
            self.description = front.description

    # -- chat history ----------------------------------------------------------------------
    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (OpenAI-format dicts), without the system prompt."""
        return list(self.conversation.messages)

    @property
    def instructions(self) -> str | None:
        """The system prompt sent with every request (template, then ``system_prompt``)."""
        return self.conversation.instructions

    def clear_messages(self, *, keep_system: bool = True) -> Robot:
        """Forget the conversation; ``keep_system=False`` also drops the instructions."""
        self.conversation.clear(keep_system=keep_system)
        return self

    def replace_messages(self, messages: Sequence[Mapping[str, Any] | Any]) -> Robot:
        """Replace the conversation, for example with one loaded from a database (see :meth:`Conversation.replace`)."""
        self.conversation.replace(messages)
        return self

    def compress_history(self, *, recent_turns: int = 3, keep_threshold: float = 0.6, drop_threshold: float = 0.2,
                         summarizer: Callable[[str], Any] | None = None) -> Robot:
        """Drop (or summarize) old turns unrelated to the recent ones (see :meth:`Conversation.compress`)."""
        self.conversation.compress(recent_turns=recent_turns, keep_threshold=keep_threshold,
                                   drop_threshold=drop_threshold, summarizer=summarizer)
        return self

    def search_history(self, query: str, *, limit: int = 5) -> list[HistoryResult]:
        """The messages most relevant to ``query``, best first; see :func:`robotlab.search_history`."""
        return self.conversation.search(query, limit=limit)

    def reset_token_totals(self) -> Robot:
        """Zero ``total_input_tokens`` and ``total_output_tokens`` (the budget ledger is kept)."""
        self.budget.reset_totals()
        return self

    # -- tools -----------------------------------------------------------------------------
    @property
    def all_tools(self) -> list[Tool]:
        """Local tools and the tools discovered on MCP servers."""
        return [*self.local_tools, *self.mcp.tools]

    def resolve_tools(self, tools: ToolsSetting = "inherit", *, network_config: RunConfig | None = None) -> list[Tool]:
        """The tools a run sends, by the hierarchy run > robot > network > global."""
        return resolve_tool_choice(self.config, tools, network_config, get_config()).select(self.all_tools,
                                                                                            robot_name=self.name)

    def with_tool(self, tool: ToolSource) -> Robot:
        """Attach one more tool."""
        return self.with_tools(tool)

    def with_tools(self, *tools: ToolSource, replace: bool = False) -> Robot:
        """Attach tools (``replace=True`` drops the current ones first)."""
        if replace:
            self.local_tools.clear()
        self.local_tools.extend(coerce_tools(tools, self))
        return self

    def on_content(self, callback: Callable[[Chunk], Any]) -> Callable[[Chunk], Any]:
        """Register another text callback (usable as a decorator)."""
        self._callbacks.content.append(callback)
        return callback

    # -- running ---------------------------------------------------------------------------
    async def arun(
        self,
        message: object = None,
        *,
        tools: ToolsSetting = "inherit",
        mcp: MCPSetting = "inherit",
        network: Network | None = None,
        task: Task | None = None,
        network_memory: Memory | None = None,
        network_config: RunConfig | None = None,
        memory: Memory | Mapping[str, Any] | None = None,
        on_content: Callable[[Chunk], object] | None = None,
        on_event: Callable[[Event], object] | None = None,
        run_id: str | None = None, hooks: type[Hook] | Sequence[type[Hook]] | None = None,
        budgets: Sequence[SharedBudget] = (),
        attachments: object = None, deps: object = None,
        **template_context: object,
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
            memory: A :class:`~robotlab.memory.Memory` to use for this run instead, or a dict to merge into its memory.
            on_content: A per-call text callback, called after the robot's own.
            on_event: Receives every :class:`~robotlab.streaming.Event` of the run.
            run_id: The id carried by events (random by default).
            hooks: :class:`~robotlab.Hook` subclasses (one or a list) active for this run only.
            budgets: :class:`~robotlab.budget.SharedBudget` objects (a network's) this run also counts against.
            attachments: Files sent with ``message``: paths, image URLs, :class:`~robotlab.Attachment` objects.
            deps: What the run's tools get as ``RunContext.deps`` (see :class:`~robotlab.RunContext`).
            template_context: Template parameters for this run; an error when the robot has no template.
        """
        options = RunOptions(tools=tools, mcp=mcp, network=network, task=task, network_config=network_config,
                             on_content=on_content, on_event=on_event, run_id=run_id, hooks=hooks, budgets=budgets,
                             attachments=attachments, deps=deps)
        if template_context:
            self.persona.check_run_parameters(list(template_context))
            self._render(template_context)
        elif self.persona.needs_render:
            self._render({})
        run_memory = choose_memory(lambda: self.memory, network=network, network_memory=network_memory, memory=memory)
        previous_writer, previous_memory = run_memory.current_writer, self._run_memory
        run_memory.current_writer, self._run_memory = self.name, run_memory
        injected = await self.persona.inject_agent_skills(message, self.local_tools)
        try:
            return await run_robot(self, message, options, memory=run_memory)
        finally:
            run_memory.current_writer, self._run_memory = previous_writer, previous_memory
            self.persona.restore_agent_skills(injected, self.local_tools)

    def _plan(self, options: RunOptions) -> RunPlan:
        """This robot's settings and ``options`` resolved for one run (see :func:`~robotlab.robot.plan.plan_run`)."""
        return plan_run(self.config, options, robot_name=self.name, provider=self.provider, llm=self.llm,
                        extra_params=self._params, callbacks=self._callbacks, defaults=get_config())

    async def call(self, result: FlowResult) -> FlowResult:
        """The network step: run on a :class:`~robotlab.task.FlowResult` and return the next one.

        The message is the result's value (an upstream robot's reply) or the run's message; extra run
        parameters are template parameters. Returns ``result.with_context(self.name, robot_result)
        .continue_(robot_result)``; an exception becomes the reply ``"Error: <ClassName>: <message>"``.
        Override it to route: ``return (await super().call(result)).activate("billing")``.
        """
        return await run_robot_step(self, result)

    # -- hooks, learnings, delegation ------------------------------------------------------
    def on(self, handler_class: type[Hook], *, context: Mapping[str, Any] | None = None) -> Registration:
        """Register a :class:`~robotlab.Hook` subclass for this robot's runs, tool calls and learnings."""
        return self.hooks.on(handler_class, context=context)

    def learn(self, text: object) -> Robot:
        """Remember ``text`` for later runs (see :meth:`alearn`); returns the robot."""
        self._learned.learn(text)
        return self

    async def alearn(self, text: object) -> Robot:
        """Remember ``text``: later runs get it prepended to their message (see :meth:`Learnings.alearn`)."""
        await self._learned.alearn(text)
        return self

    def inject_learnings(self, message: str | None) -> str | None:
        """``message`` with the learnings prepended (unchanged without learnings or message)."""
        return self._learned.inject(message)

    @overload
    def delegate(self, *, to: Robot, task: object, async_: Literal[False] = False,
                 **run_kwargs: Any) -> RobotResult: ...
    @overload
    def delegate(self, *, to: Robot, task: object, async_: Literal[True], **run_kwargs: Any) -> DelegationFuture: ...
    def delegate(self, *, to: Robot, task: object, async_: bool = False,
                 **run_kwargs: Any) -> RobotResult | DelegationFuture:
        """Have robot ``to`` run ``task`` for this one (``async_=True``: a :class:`~robotlab.DelegationFuture`)."""
        return delegating.delegate(self.name, to=to, task=task, async_=async_, **run_kwargs)

    async def adelegate(self, *, to: Robot, task: object, **run_kwargs: Any) -> RobotResult:
        """:meth:`delegate`, awaited: the delegatee's result with ``duration`` and ``delegated_by`` set."""
        return await delegating.adelegate(self.name, to=to, task=task, **run_kwargs)

    def spawn(self, **options: Unpack[RobotKwargs]) -> Robot:
        """Build a robot on this robot's bus (joined first if none), inheriting its model, provider and llm."""
        inherited: dict[str, Any] = {k: v for k, v in (("model", self.model), ("provider", self.provider),
                                                       ("llm", self._llm)) if v is not None}
        inherited["bus"] = self.mailbox.join(self.mailbox.bus)
        return build(**cast(RobotKwargs, {**inherited, **options}))

    # -- introspection ---------------------------------------------------------------------
    @property
    def crew(self) -> list[Robot]:
        """``[self]``: a robot is a crew of one."""
        return [self]

    def to_dict(self) -> dict[str, Any]:
        """A description of the robot (unset values omitted)."""
        data: dict[str, Any] = {
            "name": self.name, "description": self.description, "template": self.template,
            "skills": self.skills or None, "system_prompt": self.system_prompt,
            "local_tools": [t.name for t in self.local_tools] or None, "mcp_config": self.config.mcp,
            "tools_config": self.config.tools, "mcp_servers": self.mcp_servers or None, "model": self.model,
            "config": self.config.to_json_dict() or None, "bus": True if self.bus is not None else None,
        }
        return {k: v for k, v in data.items() if v is not None}

    def __repr__(self) -> str:
        return f"<Robot {self.name!r} model={self.model!r} tools={[t.name for t in self.local_tools]}>"


def build(**options: Unpack[RobotKwargs]) -> Robot:
    """Build a :class:`Robot`; see its arguments. An unknown option raises :class:`ConfigurationError`."""
    return Robot(**options)
