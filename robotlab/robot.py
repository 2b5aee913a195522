"""Robot: an LLM agent with instructions, tools, a chat history and safety limits.

A robot holds its configuration and its conversation, and has the parts that do the rest: a
:class:`~robotlab.persona.Persona` (template, skills, system prompt) and its learnings, a
:class:`~robotlab.mailbox.Mailbox` (the message bus), an :class:`~robotlab.mcp.MCPToolset` (its MCP servers), a
:class:`~robotlab.hooks.HookRegistry` and a :class:`~robotlab.budget.Budget`; its methods hand over to them.
:mod:`robotlab._run` runs it. A robot keeps one conversation: every ``run`` adds to its history until
:meth:`Robot.clear_messages`. ``run`` / ``arun`` return a :class:`~robotlab.RobotResult`; ``stream`` yields events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast, overload

from . import _run, robot_config
from .conversation import Conversation
from .hooks import HookRegistry
from .mailbox import Mailbox
from .mcp.management import MCPToolset
from .persona import Learnings, Persona
from .runnable import Runnable

if TYPE_CHECKING:
    from .agent_skill import AgentSkill
    from .budget import Ledger, SharedBudget
    from .bus import BusPoller, Delivery, Handler, MessageBus, RobotMessage
    from .delegation import DelegationFuture
    from .hooks import Hook, Registration
    from .llm import LLM
    from .mcp.client import MCPClient
    from .memory import Memory
    from .result import RobotResult
    from .run_config import RunConfig
    from .streaming import Chunk, Event
    from .task import FlowResult
    from .text.history_search import HistoryResult
    from .tools import Tool

__all__ = ["DEFAULT_MAX_TOOLS", "Robot", "build"]

DEFAULT_MAX_TOOLS = robot_config.DEFAULT_MAX_TOOLS  #: The most tools sent to the model in one request.

T = TypeVar("T")


class _Forward(Generic[T]):
    """A read-only robot attribute that is an attribute of one of its parts (a one-line delegation)."""

    def __init__(self, part: str, attribute: str, doc: str, *, writable: bool = False) -> None:
        self.part, self.attribute, self.__doc__, self.writable = part, attribute, doc, writable

    @overload
    def __get__(self, robot: None, owner: type) -> _Forward[T]: ...
    @overload
    def __get__(self, robot: object, owner: type) -> T: ...
    def __get__(self, robot: object | None, owner: type) -> T | _Forward[T]:
        return self if robot is None else cast(T, getattr(getattr(robot, self.part), self.attribute))

    def __set__(self, robot: object, value: Any) -> None:
        if not self.writable:
            raise AttributeError(f"'{self.attribute}' is read-only here; it belongs to the robot's {self.part}")
        setattr(getattr(robot, self.part), self.attribute, value)


class Robot(Runnable["RobotResult"]):
    """An LLM agent. Build one with :func:`robotlab.build`; every option is keyword-only.

    The options are the fields of :class:`~robotlab.robot_config.RobotOptions` (``name``, ``template``,
    ``system_prompt``, ``local_tools``, ``model``, ``llm``, ``token_budget``, ...), which says what each
    means. A ready ``RobotOptions`` may be given as the one positional argument (keywords override its
    fields). An unknown option raises :class:`ConfigurationError`.
    """

    def __init__(self, options: robot_config.RobotOptions | None = None, /, **kwargs: Any) -> None:
        settings = robot_config.RobotOptions.parse(kwargs, base=options)
        self.name = settings.name
        self.description = settings.description
        self.provider = settings.provider
        self.input: Any = None
        self.output: Any = None
        self.ask_channel: Any = None  # a robotlab.tools.ask.AskChannel; AskUser falls back to the terminal
        self.config = settings.run_config()
        self.conversation = Conversation()
        self.persona = Persona(self, self.conversation, template=settings.template,
                               system_prompt=settings.system_prompt, context=settings.context, skills=settings.skills)
        self.callbacks = settings.run_callbacks()
        self.local_tools: list[Tool] = robot_config.coerce_tools(settings.local_tools, self)
        self.mcp_servers = list(settings.mcp_servers)
        self.mcp = MCPToolset(self, local_tools=lambda: self.local_tools, discovery=settings.mcp_discovery)
        self.mcp.check(self.mcp_servers, self.mcp_config)
        self.hooks = HookRegistry()
        self._options = settings
        self._llm = settings.llm
        self._params: dict[str, Any] = {}
        self._memory: Memory | None = None
        self._run_memory: Memory | None = None
        self._learned = Learnings(self)
        self._render()
        self.budget = robot_config.budget(self.name, self.config)
        self.mailbox = Mailbox(self, settings.bus)  # last: joins bus= under the final name

    # -- parts -----------------------------------------------------------------------------
    template: _Forward[str | None] = _Forward("persona", "template", "The template id, or ``None``.")
    skills: _Forward[list[str]] = _Forward("persona", "skills", "The skill ids (the template's included).")
    agent_skills: _Forward[list[AgentSkill]] = _Forward("persona", "agent_skills", "The pending AgentSkills.")
    bus: _Forward[MessageBus | None] = _Forward("mailbox", "bus", "The message bus joined, or ``None``.")
    outbox: _Forward[dict[str, dict[str, Any]]] = _Forward("mailbox", "outbox", "Sent messages by key.")
    budget_ledger: _Forward[Ledger | None] = _Forward("budget", "ledger", "The ledger (``None`` without budgets).")
    mcp_clients: _Forward[dict[str, Any]] = _Forward("mcp", "clients", "Connected MCP clients by server name.")
    mcp_tools: _Forward[list[Tool]] = _Forward("mcp", "tools", "The tools discovered on MCP servers.")
    failed_mcp_server_names: _Forward[list[str]] = _Forward("mcp", "failed_server_names", "MCP servers that failed.")
    learnings: _Forward[list[str]] = _Forward("_learned", "items", "What the robot has learned, oldest first.")
    total_input_tokens: _Forward[int] = _Forward("budget", "total_input_tokens", "Input tokens of all runs.")
    total_output_tokens: _Forward[int] = _Forward("budget", "total_output_tokens", "Output tokens of all runs.")

    system_prompt: _Forward[str | None] = _Forward(
        "persona", "system_prompt", "The inline instructions, after the template's.", writable=True)

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
    mcp_config = property(lambda self: robot_config.setting(self.config, "mcp"),
                          doc="The robot's MCP setting (``\"none\"`` when unset).")
    tools_config = property(lambda self: robot_config.setting(self.config, "tools"),
                            doc="The robot's tools setting (``\"none\"`` when unset).")
    effective_config = property(lambda self: robot_config.effective(self.config, self.model),
                                doc="The robot's set LLM, tools and limit settings.")
    llm_params = property(lambda self: robot_config.llm_params(self.config, self._params),
                          doc="The LLM parameters sent with every request.")

    @property
    def model(self) -> str | None:
        """The model this robot uses (explicit, template, configured, or a provider default)."""
        return robot_config.resolve_model(self.config, self.provider)

    @property
    def llm(self) -> LLM:
        """Where requests go: the ``llm=`` given, else litellm with the configured connection."""
        if self._llm is None:
            self._llm = robot_config.default_llm()
        return self._llm

    @llm.setter
    def llm(self, value: LLM | None) -> None:
        """Send requests to ``value`` from now on (``None``: litellm); ``robot.llm = Recording(robot.llm)``."""
        self._llm = value

    def _render(self, run_context: Mapping[str, Any] | None = None) -> None:
        """Render the instructions; apply the templates' front matter when they were (re)loaded."""
        robot_config.apply_front_matter(self, self.persona.render(run_context))

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

    def compress_history(self, **options: Any) -> Robot:
        """Drop (or summarize) old turns unrelated to the recent ones (see :meth:`Conversation.compress`)."""
        self.conversation.compress(**options)
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

    def resolve_tools(self, tools: Any = "inherit", *, network_config: RunConfig | None = None) -> list[Tool]:
        """The tools a run sends, by the hierarchy run > robot > network > global."""
        return robot_config.resolve_tools(self, tools, network_config)

    def resolve_mcp(self, mcp: Any = "inherit", *, network_config: RunConfig | None = None) -> list[Any]:
        """The MCP servers a run needs, by the hierarchy run > robot > network > global."""
        return robot_config.resolve_mcp(self.mcp_config, mcp, network_config)

    # -- running ---------------------------------------------------------------------------
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
        on_content: Callable[[Chunk], Any] | None = None,
        on_event: Callable[[Event], Any] | None = None,
        run_id: str | None = None,
        hooks: Any = None,
        budgets: Sequence[SharedBudget] = (),
        attachments: Any = None,
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
            memory: A :class:`~robotlab.memory.Memory` to use for this run instead, or a dict to merge into its memory.
            on_content: A per-call text callback, called after the robot's own.
            on_event: Receives every :class:`~robotlab.streaming.Event` of the run.
            run_id: The id carried by events (random by default).
            hooks: :class:`~robotlab.Hook` subclasses (one or a list) active for this run only.
            budgets: :class:`~robotlab.budget.SharedBudget` objects (a network's) this run also counts against.
            attachments: Files sent with ``message``: paths, image URLs, :class:`~robotlab.Attachment` objects.
            template_context: Template parameters for this run; an error when the robot has no template.
        """
        if template_context:
            self.persona.check_run_parameters(list(template_context))
            self._render(template_context)
        elif self.persona.needs_render:
            self._render({})
        run_memory = _run.run_memory(self, network=network, network_memory=network_memory, memory=memory)
        previous_writer, previous_memory = run_memory.current_writer, self._run_memory
        run_memory.current_writer, self._run_memory = self.name, run_memory
        injected = await self.persona.inject_agent_skills(message, self.local_tools)
        try:
            return await _run.run_robot(
                self, message, tools=tools, mcp=mcp, network=network, task=task, memory=run_memory,
                network_config=network_config, per_run_hooks=hooks, on_content=on_content, on_event=on_event,
                run_id=run_id, budgets=budgets, attachments=attachments)
        finally:
            run_memory.current_writer, self._run_memory = previous_writer, previous_memory
            self.persona.restore_agent_skills(injected, self.local_tools)

    async def call(self, result: FlowResult) -> FlowResult:
        """The network step: run on a :class:`~robotlab.task.FlowResult` and return the next one.

        The message is the result's value (an upstream robot's reply) or the run's message; extra run
        parameters are template parameters. Returns ``result.with_context(self.name, robot_result)
        .continue_(robot_result)``; an exception becomes the reply ``"Error: <ClassName>: <message>"``.
        Override it to route: ``return (await super().call(result)).activate("billing")``.
        """
        return await _run.step(self, result)

    # -- hooks, learnings, delegation ------------------------------------------------------
    def on(self, handler_class: type[Hook], *, context: Mapping[str, Any] | None = None) -> Registration:
        """Register a :class:`~robotlab.Hook` subclass for this robot's runs, tool calls and learnings."""
        return self.hooks.on(handler_class, context=context)

    def learn(self, text: Any) -> Robot:
        """Remember ``text`` for later runs (see :meth:`alearn`); returns the robot."""
        self._learned.learn(text)
        return self

    async def alearn(self, text: Any) -> Robot:
        """Remember ``text``: later runs get it prepended to their message (see :meth:`Learnings.alearn`)."""
        await self._learned.alearn(text)
        return self

    def inject_learnings(self, message: str | None) -> str | None:
        """``message`` with the learnings prepended (unchanged without learnings or message)."""
        return self._learned.inject(message)

    @overload
    def delegate(self, *, to: Any, task: Any, async_: Literal[False] = False, **run_kwargs: Any) -> RobotResult: ...
    @overload
    def delegate(self, *, to: Any, task: Any, async_: Literal[True], **run_kwargs: Any) -> DelegationFuture: ...
    def delegate(self, *, to: Any, task: Any, async_: bool = False,
                 **run_kwargs: Any) -> RobotResult | DelegationFuture:
        """Have robot ``to`` run ``task`` for this one (``async_=True``: a :class:`~robotlab.DelegationFuture`)."""
        return _run.delegate(self.name, to=to, task=task, async_=async_, **run_kwargs)

    async def adelegate(self, *, to: Any, task: Any, **run_kwargs: Any) -> RobotResult:
        """:meth:`delegate`, awaited: the delegatee's result with ``duration`` and ``delegated_by`` set."""
        return await _run.adelegate(self.name, to=to, task=task, **run_kwargs)

    # -- the message bus (see :class:`~robotlab.mailbox.Mailbox`) --------------------------
    def send_message(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
        """Send ``content`` to the robot(s) named ``to``; recorded in :attr:`outbox` as ``"sent"``."""
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

    def serve(self, *, auto_reply: bool = True) -> Robot:
        """Answer each incoming task with this robot's ``arun(content).reply``."""
        self.mailbox.serve(auto_reply=auto_reply)
        return self

    def with_bus(self, bus: MessageBus | None = None) -> Robot:
        """Join ``bus`` (leaving the current one), or, without one, rejoin the current bus or a new one."""
        self.mailbox.join(bus)
        return self

    def assign_bus_poller(self, poller: BusPoller, *, group: str = "default") -> None:
        """Route this robot's deliveries through ``poller`` (a network's shared one) under ``group``."""
        self.mailbox.assign_poller(poller, group=group)

    async def _process_delivery(self, delivery: Delivery) -> None:
        await self.mailbox.process(delivery)

    def spawn(self, *, name: str = "robot", system_prompt: str | None = None, template: str | None = None,
              local_tools: Any = (), **options: Any) -> Robot:
        """Build a robot on this robot's bus (joined first if none), inheriting its model, provider and llm."""
        inherited: dict[str, Any] = {k: v for k, v in (("model", self.model), ("provider", self.provider),
                                                       ("llm", self._llm)) if v is not None}
        inherited["bus"] = self.mailbox.join(self.mailbox.bus)
        return build(name=name, system_prompt=system_prompt, template=template, local_tools=local_tools,
                     **{**inherited, **options})

    # -- MCP (see :class:`~robotlab.mcp.MCPToolset`) ----------------------------------------
    async def aconnect_mcp(self) -> Robot:
        """Connect the robot's MCP servers now rather than on the first run; returns the robot."""
        await self.mcp.connect(self.resolve_mcp("inherit"))
        return self

    def connect_mcp(self) -> Robot:
        """Blocking :meth:`aconnect_mcp` (for example to show connection status at start-up)."""
        self.mcp.connect_blocking(self.resolve_mcp("inherit"))
        return self

    def inject_mcp(self, *, clients: dict[str, Any] | list[Any], tools: list[Tool]) -> Robot:
        """Use MCP clients connected elsewhere and their tools (see :meth:`MCPToolset.inject`)."""
        self.mcp.inject(clients=clients, tools=tools)
        return self

    def mcp_client(self, name: str) -> MCPClient | None:
        """The connected client of MCP server ``name``, or ``None``."""
        return self.mcp.client(name)

    async def adisconnect(self) -> Robot:
        """Close every MCP connection of the robot and leave its bus; a later run connects again."""
        await self.mcp.adisconnect()
        self.mailbox.leave()
        return self

    def disconnect(self) -> Robot:
        """Blocking :meth:`adisconnect`."""
        return self.mcp.run_sync(self.adisconnect())

    # -- chaining --------------------------------------------------------------------------
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
        current = self.conversation.instructions
        self.conversation.instructions = instructions if replace or not current else f"{current}\n\n{instructions}"
        return self

    def with_tool(self, tool: Any) -> Robot:
        """Attach one more tool."""
        return self.with_tools(tool)

    def with_tools(self, *tools: Any, replace: bool = False) -> Robot:
        """Attach tools (``replace=True`` drops the current ones first)."""
        if replace:
            self.local_tools.clear()
        self.local_tools.extend(robot_config.coerce_tools(tools, self))
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
        return self.with_params(response_format=schema)

    def with_thinking(self, effort: str = "medium") -> Robot:
        """Ask reasoning models to think (litellm's ``reasoning_effort``)."""
        return self.with_params(reasoning_effort=effort)

    def with_context(self, **context: Any) -> Robot:
        """Merge template parameters and re-render the template."""
        self.persona.update_context(context)
        self._render({})
        return self

    def with_template(self, template: str, **context: Any) -> Robot:
        """Switch to another template (re-applies its front matter)."""
        self.persona.switch_template(template)
        if context:
            self.persona.update_context(context)
        self._render()
        return self

    def on_content(self, callback: Callable[[Chunk], Any]) -> Callable[[Chunk], Any]:
        """Register another text callback (usable as a decorator)."""
        self.callbacks.content.append(callback)
        return callback

    def update(self, *, template: str | None = None, context: Mapping[str, Any] | None = None,
               system_prompt: str | None = None, model: str | None = None, temperature: float | None = None,
               **params: Any) -> Robot:
        """Change several settings at once; extra keywords become LLM parameters."""
        if context is not None:
            self.persona.update_context(context)
        if system_prompt is not None:
            self.persona.system_prompt = system_prompt
        if template is not None:
            self.with_template(template)
        else:
            self._render()
        if model is not None:
            self.with_model(model)
        if temperature is not None:
            self.with_temperature(temperature)
        if params:
            self.with_params(**params)
        return self

    # -- introspection ---------------------------------------------------------------------
    @property
    def crew(self) -> list[Robot]:
        """``[self]``: a robot is a crew of one."""
        return [self]

    def to_dict(self) -> dict[str, Any]:
        """A description of the robot (unset values omitted)."""
        return robot_config.describe(self)

    def __repr__(self) -> str:
        return f"<Robot {self.name!r} model={self.model!r} tools={[t.name for t in self.local_tools]}>"


def build(**options: Any) -> Robot:
    """Build a :class:`Robot`; see its arguments. An unknown option raises :class:`ConfigurationError`."""
    return Robot(**options)

