"""The :class:`Network` class: robots as the tasks of a DAG, with shared memory, routing and hooks.

See :mod:`robotlab.network` for the overview; the scheduling rules live in :mod:`robotlab.network.turn`,
the running in :mod:`robotlab.network.runner`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import streaming
from ..budget import SharedBudget
from ..bus import BusPoller
from ..errors import ConfigurationError
from ..hooks import Hook, HookRegistry, Registration, normalize_hooks
from ..memory import Memory
from ..run_config import RunConfig
from ..runnable import Runnable
from ..runtime import run_sync
from ..streaming import Event, EventEmitter, failure_data
from ..task import FlowResult, Task, run_hooked
from ..tools.parking import RunParked
from .broadcast import Broadcaster
from .layout import Layout
from .runner import LocalTurn, reply_of, run_nested, run_task
from .turn import RUNNING, Router, TurnState

__all__ = ["CONCURRENCY_OPTIONS", "Network", "create_network"]

#: The accepted ``concurrency`` names (every one runs tasks as asyncio tasks); a positive int is a limit.
CONCURRENCY_OPTIONS = ("auto", "threads", "async")


class Network(Layout, Runnable[FlowResult]):
    """Robots run as the tasks of a dependency graph (Ruby ``RobotLab::Network``).

    Build one with :func:`create_network`. ``robots`` is keyed by TASK name, while a run's
    ``result.context`` is keyed by ROBOT name; give each task its own robot (a robot keeps one conversation).

    Args:
        name: The network's name (also its memory's ``network_name``).
        concurrency: ``"auto"`` (also ``"async"`` or ``"threads"``: tasks are asyncio tasks either way) or a
            positive int, the most tasks running at once.
        memory: The shared :class:`~robotlab.memory.Memory` (a new one by default; a dict seeds a new one).
        config: A :class:`~robotlab.run_config.RunConfig` (or dict): the tools/MCP parent of the robots,
            ``max_concurrent_robots``, and ``token_budget`` / ``cost_budget`` (one :attr:`budget` for all tasks).
        router: ``router(flow_result) -> task name | list | None``, asked whenever the network has nothing
            left to run; it activates optional tasks (see the guide).

    A network is also a step (:meth:`call` runs it in another network); ``last_turn`` is its latest turn's state.
    """

    def __init__(
        self,
        *,
        name: str,
        concurrency: str | int = "auto",
        memory: Memory | Mapping[str, Any] | None = None,
        config: RunConfig | Mapping[str, Any] | None = None,
        router: Router | None = None,
    ) -> None:
        if not (concurrency in CONCURRENCY_OPTIONS or (type(concurrency) is int and concurrency > 0)):
            raise ValueError(f"Invalid concurrency option: {concurrency!r}. Valid options: "
                             f"{', '.join(map(repr, CONCURRENCY_OPTIONS))} or a positive int")
        self.name = str(name)
        self.concurrency = concurrency
        if isinstance(memory, Memory):
            self.memory = memory
        else:
            self.memory = Memory(network_name=self.name)
            self.memory.merge(memory or {})
        self.config = config if isinstance(config, RunConfig) else RunConfig(**dict(config or {}))
        self.router = router
        self.budget = SharedBudget.of(f"network '{self.name}'", token_budget=self.config.token_budget,  # all tasks'
                                      cost_budget=self.config.cost_budget)
        self.robots: dict[str, Any] = {}
        self.tasks: dict[str, Task] = {}
        self.bus_poller = BusPoller()
        self._depends_on: dict[str, list[str] | None] = {}
        self._groups: dict[str, list[str]] = {}
        self._broadcaster = Broadcaster(self.name)
        self.hooks = HookRegistry()
        """The network's hook registry (see :meth:`on`)."""

    # -- running -------------------------------------------------------------------------
    @property
    def concurrency_limit(self) -> int | None:
        """The most tasks running at once: the smaller of ``max_concurrent_robots`` and an int ``concurrency``."""
        limits = [v for v in (self.config.max_concurrent_robots, self.concurrency) if type(v) is int and v > 0]
        return min(limits) if limits else None

    async def arun(
        self,
        message: object = None,
        *,
        on_event: Callable[[Event], Any] | None = None,
        on_content: Callable[[Any], Any] | None = None,
        hooks: object = None,
        run_id: str | None = None,
        **run_context: Any,
    ) -> FlowResult:
        """Run the network and return the final :class:`~robotlab.task.FlowResult`.

        ``message`` and the keyword arguments are the run parameters every task sees
        (``result.context["run_params"]``); the value is the RobotResult of the last task to finish
        (of the last-declared one when several end the graph).

        Args:
            message: The message every task sees.
            on_event: Receives every :class:`~robotlab.streaming.Event` of the run, with one ``run_id`` and
                one ``seq``: ``run.started`` (``network``, ``message``); per task ``step.started``, the
                robot's own events tagged with ``network``, ``task`` and ``robot`` (its ``stream.ended``
                left out), then ``step.completed`` (``reply``) or ``step.failed`` (``error``,
                ``error_type``); finally ``run.completed`` (``network``, ``reply``, ``tasks``) or
                ``run.failed``, and ``stream.ended``.
            on_content: Given to every robot's run: receives each :class:`~robotlab.streaming.Chunk` of
                text (parallel tasks interleave; ``on_event``'s ``text.delta`` events say whose).
            hooks: :class:`~robotlab.Hook` subclasses (one or a list) for this run only: they see its
                ``network_run`` and ``task`` families (after the global and network registries) and are
                passed to every robot's run.
            run_id: The id carried by the events (random by default).
            **run_context: More run parameters every task sees.

        Raises:
            ConfigurationError: the graph is invalid, has nothing to start, or routing named an unknown task.
            TypeError: ``hooks`` holds something that is not a Hook subclass.
        """
        state = self.last_turn = self.turn_state()
        handlers = normalize_hooks(hooks)
        params = self.run_params(message, on_content=on_content, hooks=handlers, **run_context)
        emitter = EventEmitter(on_event, run_id=run_id) if on_event is not None else None
        turn = LocalTurn(self, state, params, emitter)

        def execute() -> Awaitable[FlowResult]:
            return run_hooked("network_run", turn.execute, network=self, per_run_hooks=handlers, context=params,
                              memory=self.memory, config=self.config)

        if emitter is None:
            return await execute()
        emitter.emit(streaming.RUN_STARTED, network=self.name, message=None if message is None else str(message))
        try:
            result = await execute()
        except BaseException as exc:
            if not isinstance(exc, RunParked):  # a parked turn resumes later
                emitter.emit(streaming.RUN_FAILED, network=self.name, **failure_data(exc))
                emitter.emit(streaming.STREAM_ENDED)
            raise
        emitter.emit(streaming.RUN_COMPLETED, network=self.name, reply=reply_of(result.value),
                     tasks=list(state.results))
        emitter.emit(streaming.STREAM_ENDED)
        return result

    def turn_state(self) -> TurnState:
        """A fresh :class:`~robotlab.network.turn.TurnState` for one turn of this network, the graph checked.

        Raises:
            ConfigurationError: the graph is invalid (see :meth:`validate`), has no tasks, or has nothing to
                start (every task optional and no router).
        """
        deps = self.dependencies()
        if not deps:
            raise ConfigurationError(f"Network '{self.name}' has no tasks")
        if self.router is None and all(d is None for d in deps.values()):
            raise ConfigurationError(f"Network '{self.name}' has no task to start: every task is optional "
                                     "and there is no router")
        for task in self.tasks.values():
            self._check_nesting(task.robot)
        return TurnState(self.name, deps)

    def run_params(self, message: object = None, *, on_content: Callable[[Any], Any] | None = None,
                   hooks: object = None, **run_context: Any) -> dict[str, Any]:
        """The run parameters every task of a turn sees (``result.context["run_params"]``).

        ``message`` and ``run_context``, plus the network's memory (``network_memory``), the network, its
        config (merged over an outer network's ``network_config``), ``budgets``, ``hooks`` and ``on_content``.

        Raises:
            TypeError: ``hooks`` holds something that is not a Hook subclass.
        """
        handlers = normalize_hooks(hooks)
        params = dict(run_context)
        if message is not None:
            params["message"] = message
        inherited = params.get("network_config")  # from the network this one is nested in
        params.update(network_memory=self.memory, network=self)
        config = inherited.merge(self.config) if isinstance(inherited, RunConfig) else self.config
        if not config.is_empty:
            params["network_config"] = config
        if self.budget is not None:  # an outer network's budgets still apply
            params["budgets"] = [*params.get("budgets", ()), self.budget]
        if handlers:
            params["hooks"] = handlers
        if on_content is not None:
            params["on_content"] = on_content
        return params

    async def arun_task(
        self,
        name: str,
        state: TurnState,
        message: object = None,
        *,
        on_event: Callable[[Event], Any] | None = None,
        on_content: Callable[[Any], Any] | None = None,
        hooks: object = None,
        run_id: str | None = None,
        **run_context: Any,
    ) -> FlowResult:
        """Run ONE started task of a turn and return its result; ``state`` is not changed.

        This is the unit of work of a turn whose tasks run as separate jobs (on other processes or
        machines): a worker rebuilds the network, loads the stored ``state``, runs the task, and records
        the result with ``state.complete(name, result)`` (or ``state.fail(name, error)`` when this raises).
        The task receives exactly what it would in :meth:`arun` (``state.input(name, run_params)``).
        The ``network_run`` hooks do not fire here (they wrap a whole turn); the ``task`` hooks do.

        Args:
            name: A task that ``state`` has started (``state.advance`` returned it).
            state: The turn's state.
            message: The turn's message, as given to :meth:`arun`.
            on_content: As for :meth:`arun`.
            hooks: As for :meth:`arun`.
            on_event: Receives the task's events: ``step.started``, its robot's events tagged with
                ``network``, ``task`` and ``robot``, then ``step.completed`` or ``step.failed``, with their
                own ``seq`` from 1.
            run_id: The id carried by the events (random by default).
            **run_context: The turn's other run parameters, as given to :meth:`arun`.

        Raises:
            ValueError: ``name`` is not running in ``state``.
            BaseException: what the task raised.
        """
        if state.status.get(name) != RUNNING or name not in self.tasks:
            raise ValueError(f"Task '{name}' of network '{self.name}' is not running in this turn "
                             f"(its status is {state.status.get(name, 'unknown')})")
        params = self.run_params(message, on_content=on_content, hooks=hooks, **run_context)
        emitter = EventEmitter(on_event, run_id=run_id) if on_event is not None else None
        return await run_task(self, self.tasks[name], state.input(name, params), emitter)

    def run(self, message: object = None, **run_context: Any) -> FlowResult:
        """Synchronous :meth:`arun` (on RobotLab's background event loop)."""
        return run_sync(self.arun(message, **run_context))

    async def call(self, result: FlowResult) -> FlowResult:
        """The network as one step of another network (``outer.task("research", inner_network)``).

        Like :meth:`Robot.call <robotlab.robot.Robot.call>`: the message is the result's value (the upstream
        reply) or the run's message, and the other run parameters (``on_event``, ``hooks``, the outer
        task's ``tools``/``mcp``/``memory``/``config`` included) become this network's run parameters. It
        runs with its own memory, with its ``config`` merged over the outer one. Returns
        ``result.with_context(self.name, inner_result).continue_(inner_result.value)`` with the inner
        run's errors added: keyed by the NETWORK's name, the inner FlowResult, whose value (its final
        RobotResult) the next task receives. An exception becomes the error result
        ``"Error: <ClassName>: <message>"`` (also in ``errors[name]``), as for a robot; the outer network
        goes on. An inner halt stops the inner network only.
        """
        return await run_nested(self, result)

    # -- memory and broadcasts -----------------------------------------------------------
    def reset_memory(self) -> Network:
        """Clear the shared memory."""
        self.memory.reset()
        return self

    def on_broadcast(self, handler: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
        """Call ``handler(envelope)`` on every :meth:`broadcast` (usable as a decorator).

        Raises:
            ValueError: ``handler`` is not callable (``"Block required for on_broadcast"``).
        """
        return self._broadcaster.add(handler)

    def broadcast(self, payload: object) -> Network:
        """Send ``{"payload", "network", "timestamp"}`` to every handler, then set it in memory.

        A sync handler runs at once; a coroutine handler runs as a task on the running loop (or to its end
        on RobotLab's loop when there is none). A handler that raises is logged. The envelope is stored
        under :data:`~robotlab.network.BROADCAST_KEY`, so ``memory.subscribe("_network_broadcast", ...)``
        sees it too.
        """
        self._broadcaster.send(payload, self.memory)
        return self

    # -- hooks ---------------------------------------------------------------------------
    def on(self, handler: type[Hook], *, context: Mapping[str, Any] | None = None) -> Registration:
        """Register a :class:`~robotlab.hooks.Hook` for this network's turns, tasks and robots' runs."""
        return self.hooks.on(handler, context=context)

    # -- robots --------------------------------------------------------------------------
    @property
    def crew(self) -> list[Any]:
        """The robots in task order (:meth:`add_robot`'s last; a nested network's crew in its place)."""
        crew: list[Any] = []
        for runnable in self.robots.values():
            crew.extend(runnable.crew if isinstance(runnable, Network) else [runnable])
        return crew

    @property
    def is_network(self) -> bool:
        """``True``."""
        return True

    def robot(self, name: str) -> Any:
        """The robot of task ``name`` (or added under that name), or ``None``; also ``network[name]``."""
        return self.robots.get(str(name))

    def __getitem__(self, name: str) -> Any:
        return self.robot(name)

    @property
    def available_robots(self) -> list[Any]:
        """Every robot of the network."""
        return list(self.robots.values())

    def add_robot(self, robot: Any) -> Network:
        """Add a robot to the crew under its own name, without a task (a taken name is a ``ValueError``)."""
        if robot.name in self.robots:
            raise ValueError(f"Robot '{robot.name}' already exists in network '{self.name}'")
        self.robots[robot.name] = robot
        return self

    def remove_robot(self, name: str) -> Any:
        """Remove and return the robot under ``name`` (or ``None``); its task, if any, stays."""
        return self.robots.pop(str(name), None)

    # -- introspection -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """``{name, robots: [keys], tasks: [names], optional_tasks, config}`` (unset values omitted)."""
        data = {
            "name": self.name,
            "robots": list(self.robots),
            "tasks": list(self.tasks),
            "optional_tasks": self.optional_tasks,
            "config": self.config.to_json_dict() or None,
        }
        return {k: v for k, v in data.items() if v is not None}

    def __repr__(self) -> str:
        return f"<Network {self.name!r} tasks={list(self.tasks)}>"


def create_network(
    builder: Callable[[Network], Any] | None = None,
    /,
    *,
    name: str,
    concurrency: str | int = "auto",
    memory: Memory | Mapping[str, Any] | None = None,
    config: RunConfig | Mapping[str, Any] | None = None,
    router: Router | None = None,
) -> Network:
    """Create a :class:`Network`; ``builder(network)``, when given, adds its tasks and the graph is checked.

    Also a context manager: ``with create_network(name="x") as network: network.task(...)`` checks the
    graph on exit.
    """
    network = Network(name=name, concurrency=concurrency, memory=memory, config=config, router=router)
    if builder is not None:
        builder(network)
        network.validate()
    return network
