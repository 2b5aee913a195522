"""Networks: robots as tasks of a DAG, run concurrently on asyncio with shared memory and routing.

::

    network = robotlab.create_network(name="support")
    network.task("classifier", classifier, depends_on="none")       # a root
    network.task("billing", billing, depends_on="optional")         # runs only when activated
    network.task("summary", summarizer, depends_on=["classifier"])  # after classifier
    result = network.run("I was charged twice")                     # a FlowResult

A task starts as soon as all its dependencies are done, so independent tasks run at the same time (up to
``max_concurrent_robots`` of the network's config, or ``concurrency=<n>``) and a run takes as long as its
critical path. Optional tasks run when a step activates them (``result.activate("billing")`` in a robot's
``call``) or when the network's ``router`` names them.

``network.run(message, on_event=callback)`` streams the run: the network's own events (``run.*``,
``step.*`` per task) and every robot's, all with the network run's ``run_id`` and ``seq``, each robot
event tagged with ``network``, ``task`` and ``robot`` in its data. A network can itself be the runnable
of another network's task (a nested network). See ``docs/guides/networks.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from . import streaming
from ._runtime import run_sync
from .bus import BusPoller
from .errors import ConfigurationError
from .hooks import Hook, HookRegistry, Registration, normalize_hooks
from .memory import Memory
from .result import RobotResult
from .run_config import RunConfig
from .runnable import Runnable
from .streaming import Event, EventEmitter
from .task import FlowResult, Task, error_result, extract_run_context, run_hooked

__all__ = ["BROADCAST_KEY", "CONCURRENCY_OPTIONS", "Network", "create_network"]

logger = logging.getLogger("robotlab.network")

#: The memory key :meth:`Network.broadcast` writes its envelope to.
BROADCAST_KEY = "_network_broadcast"

#: The accepted ``concurrency`` names (every one runs tasks as asyncio tasks); a positive int is a limit.
CONCURRENCY_OPTIONS = ("auto", "threads", "async")

Router = Callable[[FlowResult], Any]
_OPTIONAL = "optional"


def _dependencies(task: str, depends_on: Any) -> list[str] | None:
    """``None`` for an optional task, else the dependency names (``[]`` for a root)."""
    if depends_on is None or (isinstance(depends_on, str) and depends_on == "none"):
        return []
    if isinstance(depends_on, str):
        return None if depends_on == _OPTIONAL else [depends_on]
    if isinstance(depends_on, Iterable):
        names = [str(getattr(d, "name", d)) for d in depends_on]
        if _OPTIONAL in names:
            raise ConfigurationError(f"Task '{task}': depends_on='optional' cannot be combined with task names")
        return names
    raise TypeError(f"Task '{task}': depends_on must be 'none', 'optional', a task name or a list, got {depends_on!r}")


def _node_id(name: str) -> str:
    return re.sub(r"\W", "_", name) or "_"


def _merge(results: Sequence[FlowResult], run_params: Any, value: Any) -> FlowResult:
    """One result from several: contexts merged in order (robot entries), errors concatenated."""
    context: dict[str, Any] = {"run_params": run_params}
    errors: dict[str, list[str]] = {}
    for result in results:
        context.update((k, v) for k, v in result.context.items() if k != "run_params")
        for key, messages in result.errors.items():
            bucket = errors.setdefault(key, [])
            bucket.extend(m for m in messages if m not in bucket)
    return FlowResult(value, context=context, errors=errors)


def _reply(value: Any) -> Any:
    return value.reply if isinstance(value, RobotResult) else None


def _relay(emitter: EventEmitter, **tags: Any) -> Callable[[Event], None]:
    """A task's ``on_event``: its runnable's events go on into the network run's stream (the network's
    ``run_id`` and ``seq``) with ``tags`` added where the event has no such key, and without the
    runnable's own ``stream.ended`` (the network ends the stream)."""

    def relay(event: Event) -> None:
        if event.kind != streaming.STREAM_ENDED:
            emitter.emit(event.kind, **{**tags, **event.data})

    return relay


def _path_to(start: Any, target: Network, seen: set[int]) -> list[str] | None:
    """The names of the networks from ``start`` down to ``target`` through nested tasks, or ``None``."""
    if start is target:
        return [target.name]
    if not isinstance(start, Network) or id(start) in seen:
        return None
    seen.add(id(start))
    for task in start.tasks.values():
        path = _path_to(task.robot, target, seen)
        if path is not None:
            return [start.name, *path]
    return None


class _Run:
    """The state of one network run: which tasks started, finished or were skipped."""

    def __init__(self, network: Network, initial: FlowResult, deps: dict[str, list[str] | None],
                 emitter: EventEmitter | None = None) -> None:
        self.network = network
        self.emitter = emitter
        self.initial = initial
        self.deps = deps
        self.run_params = initial.context.get("run_params")
        self.results: dict[str, FlowResult] = {}  # finished tasks, in finishing order
        self.parents: dict[str, list[str]] = {}
        self.skipped: set[str] = set()
        self.activated: list[str] = []
        self.running: dict[asyncio.Future[FlowResult], str] = {}
        self.halted: FlowResult | None = None
        limit = network.concurrency_limit
        self.semaphore = asyncio.Semaphore(limit) if limit else None

    def start(self, name: str, parents: list[str], flow: FlowResult | None = None) -> None:
        self.skipped.discard(name)
        self.parents[name] = parents
        if flow is None:
            if parents:
                finished = [self.results[p] for p in parents]
                flow = _merge(finished, self.run_params, finished[-1].value)
            else:
                flow = self.initial
        self.running[asyncio.ensure_future(self.call(self.network.tasks[name], flow))] = name

    async def call(self, task: Task, flow: FlowResult) -> FlowResult:
        if self.semaphore is None:
            return await self.step(task, flow)
        async with self.semaphore:
            return await self.step(task, flow)

    async def step(self, task: Task, flow: FlowResult) -> FlowResult:
        """Run one task; with a listener, between ``step.started`` and ``step.completed`` (or ``step.failed``)."""
        emitter = self.emitter
        tags = {"network": self.network.name, "task": task.name, "robot": getattr(task.robot, "name", None)}
        if emitter is not None:
            params = {**(flow.context.get("run_params") or {}), "on_event": _relay(emitter, **tags)}
            flow = flow.with_context("run_params", params)
            emitter.emit(streaming.STEP_STARTED, **tags)
        try:
            result = await task.call(flow)
            if not isinstance(result, FlowResult):
                raise TypeError(f"Task '{task.name}': {task.robot!r}.call() must return a FlowResult, "
                                f"got {result!r}")
        except BaseException as exc:  # cancelled too (another task failed), so every step.started is closed
            if emitter is not None:
                emitter.emit(streaming.STEP_FAILED, **tags, error=str(exc), error_type=type(exc).__name__)
            raise
        if emitter is not None:
            emitter.emit(streaming.STEP_COMPLETED, **tags, reply=_reply(result.value))
        return result

    def settle(self) -> None:
        """Start every required task whose dependencies are done; skip those whose dependencies all were."""
        changed = True
        while changed and self.halted is None:
            changed = False
            for name, deps in self.deps.items():
                if deps is None or name in self.parents or name in self.skipped:
                    continue
                if not deps:
                    self.start(name, [])
                elif all(d in self.results or d in self.skipped for d in deps):
                    ran = [d for d in deps if d in self.results]
                    if ran:
                        self.start(name, ran)
                    else:
                        self.skipped.add(name)
                else:
                    continue
                changed = True

    def activate(self, names: Iterable[str], source: str, parents: list[str], flow: FlowResult | None) -> bool:
        """Start the optional tasks ``names`` not started yet; an unknown name is an error."""
        started = False
        for name in names:
            if name not in self.deps:
                known = ", ".join(self.deps)
                raise ConfigurationError(
                    f"{source} activated unknown task '{name}' in network '{self.network.name}' (tasks: {known})"
                )
            if self.deps[name] is None and name not in self.parents:
                self.activated.append(name)
                if self.halted is None:
                    self.start(name, parents, flow)
                    started = True
        return started

    def accumulated(self) -> FlowResult:
        finished = list(self.results.values())
        return _merge(finished, self.run_params, finished[-1].value if finished else self.initial.value)

    async def execute(self) -> FlowResult:
        router, routed = self.network.router, True
        try:
            while True:
                self.settle()
                if self.running:
                    await self.finish_some()
                    routed = True
                    continue
                if self.halted is not None:
                    break
                if router is not None and routed:
                    routed = False
                    if await self.route(router):
                        continue
                pending = [n for n, d in self.deps.items() if d is None and n not in self.parents]
                if pending and not set(pending) <= self.skipped:
                    self.skipped.update(pending)
                    continue
                break
        finally:
            for future in self.running:
                future.cancel()
            if self.running:  # let them finish being cancelled before the run reports its end
                await asyncio.wait(self.running)
        return self.final()

    async def finish_some(self) -> None:
        done, _ = await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
        for future in sorted(done, key=lambda f: list(self.deps).index(self.running[f])):
            name = self.running.pop(future)
            result = future.result()
            self.results[name] = result
            if not result.is_continue and self.halted is None:
                self.halted = result
            self.activate(result.activated_steps, f"Task '{name}'", [name], None)

    async def route(self, router: Router) -> bool:
        current = self.accumulated()
        answer = router(current)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is None:
            return False
        if isinstance(answer, str):
            answer = [answer]
        elif not isinstance(answer, Iterable):
            raise TypeError(f"The router of network '{self.network.name}' must return a task name, a list or None, "
                            f"got {answer!r}")
        flow = FlowResult(self.initial.value, context=current.context, errors=current.errors)
        return self.activate([str(n) for n in answer], "The router", list(self.results), flow)

    def final(self) -> FlowResult:
        upstream = {p for parents in self.parents.values() for p in parents}
        sinks = [n for n in self.deps if n in self.results and n not in upstream]
        if self.halted is not None:
            value = self.halted.value
        else:
            value = self.results[sinks[-1]].value if sinks else self.initial.value
        merged = _merge(list(self.results.values()), self.run_params, value)
        result = FlowResult(value, context=merged.context, errors=merged.errors, activated_steps=self.activated)
        return result if self.halted is None else result.halt()


class Network(Runnable):
    """Robots run as the tasks of a dependency graph (Ruby ``RobotLab::Network``).

    Build one with :func:`create_network`. ``robots`` is keyed by TASK name, while a run's
    ``result.context`` is keyed by ROBOT name; give each task its own robot (a robot keeps one conversation).

    Args:
        name: The network's name (also its memory's ``network_name``).
        concurrency: ``"auto"`` (also ``"async"`` or ``"threads"``: tasks are asyncio tasks either way) or a
            positive int, the most tasks running at once.
        memory: The shared :class:`~robotlab.memory.Memory` (a new one by default; a dict seeds a new one).
        config: A :class:`~robotlab.run_config.RunConfig` (or dict): the tools/MCP parent of the robots and
            ``max_concurrent_robots``.
        router: ``router(flow_result) -> task name | list | None``, asked whenever the network has nothing
            left to run; it activates optional tasks (see the guide).

    A network is also a step: :meth:`call` runs it as one task of another network.
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
        self.robots: dict[str, Any] = {}
        self.tasks: dict[str, Task] = {}
        self.bus_poller = BusPoller()
        self._depends_on: dict[str, list[str] | None] = {}
        self._groups: dict[str, list[str]] = {}
        self._broadcast_handlers: list[Callable[[dict[str, Any]], Any]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self.hooks = HookRegistry()
        """The network's hook registry (see :meth:`on`)."""

    # -- building ------------------------------------------------------------------------
    def task(
        self,
        name: str,
        robot: Any,
        *,
        context: Mapping[str, Any] | None = None,
        mcp: Any = "none",
        tools: Any = "none",
        memory: Memory | Mapping[str, Any] | None = None,
        config: RunConfig | Mapping[str, Any] | None = None,
        depends_on: str | Iterable[str] | None = "none",
        poller_group: str = "default",
    ) -> Network:
        """Add ``robot`` as the task ``name``; returns the network (so calls chain).

        Args:
            depends_on: ``"none"`` (a root), a task or :meth:`parallel` group name, a list of them, or
                ``"optional"`` (runs only when activated by routing).
            context, mcp, tools, memory, config: The task's settings (see :class:`~robotlab.task.Task`).
            poller_group: The bus poller group label of the robot.

        ``robot`` may be another :class:`Network`, which then runs as this one task (see :meth:`call`).

        Raises:
            ConfigurationError: the name is taken, the robot has no ``call`` step, or it is a network that
                contains this one (``"Network 'a' cannot contain itself: a -> b -> a"``).
        """
        name = str(name)
        if name in self.tasks or name in self._groups:
            raise ConfigurationError(f"Network '{self.name}' already has a task or group named '{name}'")
        if not callable(getattr(robot, "call", None)):
            raise ConfigurationError(f"Task '{name}': {robot!r} is not a robot (it has no call() step)")
        self._check_nesting(robot)
        deps = _dependencies(name, depends_on)
        self.tasks[name] = Task(name=name, robot=robot, context=context, mcp=mcp, tools=tools, memory=memory,
                                config=config, network=self)
        self._depends_on[name] = deps
        self.robots[name] = robot
        self.bus_poller.add_group(poller_group)
        if callable(getattr(robot, "assign_bus_poller", None)):
            robot.assign_bus_poller(self.bus_poller, group=poller_group)
        return self

    def parallel(self, name: str | None = None, robots: Mapping[str, Any] | Sequence[Any] = (), *,
                 depends_on: str | Iterable[str] | None = "none") -> Network:
        """Add several tasks with the same dependencies; ``name`` lets later tasks depend on all of them.

        ``robots`` maps task names to robots, or is a list of robots named after their tasks.
        """
        items = list(robots.items()) if isinstance(robots, Mapping) else [(r.name, r) for r in robots]
        if name is not None and (str(name) in self.tasks or str(name) in self._groups):
            raise ConfigurationError(f"Network '{self.name}' already has a task or group named '{name}'")
        for task_name, robot in items:
            self.task(task_name, robot, depends_on=depends_on)
        if name is not None:
            self._groups[str(name)] = [str(task_name) for task_name, _ in items]
        return self

    def dependencies(self) -> dict[str, list[str] | None]:
        """Each task's dependencies (group names expanded); ``None`` marks an optional task.

        Raises:
            ConfigurationError: a dependency names no task, or the dependencies form a cycle.
        """
        expanded: dict[str, list[str] | None] = {}
        for task, deps in self._depends_on.items():
            if deps is None:
                expanded[task] = None
                continue
            unknown = [d for d in deps if d not in self.tasks and d not in self._groups]
            if unknown:
                raise ConfigurationError(f"Task '{task}' in network '{self.name}' depends on unknown task(s): "
                                         f"{', '.join(repr(u) for u in unknown)}")
            names = [m for d in deps for m in self._groups.get(d, [d])]
            expanded[task] = list(dict.fromkeys(names))
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        path: list[str] = []

        def visit(task: str) -> None:
            state[task] = 1
            path.append(task)
            for dep in expanded[task] or []:
                if state.get(dep) == 1:
                    cycle = [*path[path.index(dep):], dep]
                    raise ConfigurationError(f"Network '{self.name}' has a dependency cycle: {' -> '.join(cycle)}")
                if dep not in state:
                    visit(dep)
            path.pop()
            state[task] = 2

        for task in expanded:
            if task not in state:
                visit(task)
        return expanded

    def _check_nesting(self, runnable: Any) -> None:
        path = _path_to(runnable, self, set())
        if path is not None:
            raise ConfigurationError(f"Network '{self.name}' cannot contain itself: "
                                     f"{' -> '.join([self.name, *path])}")

    def validate(self) -> Network:
        """Check the graph now (unknown dependencies, cycles, a network nested in itself); :meth:`arun`
        checks it too."""
        self.dependencies()
        for task in self.tasks.values():
            self._check_nesting(task.robot)
        return self

    def __enter__(self) -> Network:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.validate()

    # -- running -------------------------------------------------------------------------
    @property
    def concurrency_limit(self) -> int | None:
        """The most tasks running at once: the smaller of ``max_concurrent_robots`` and an int ``concurrency``."""
        limits = [v for v in (self.config.max_concurrent_robots, self.concurrency) if type(v) is int and v > 0]
        return min(limits) if limits else None

    async def arun(
        self,
        message: Any = None,
        *,
        on_event: Callable[[Event], Any] | None = None,
        on_content: Callable[[Any], Any] | None = None,
        hooks: Any = None,
        run_id: str | None = None,
        **run_context: Any,
    ) -> FlowResult:
        """Run the network and return the final :class:`~robotlab.task.FlowResult`.

        ``message`` and the keyword arguments are the run parameters every task sees
        (``result.context["run_params"]``); the value is the RobotResult of the last task to finish
        (of the last-declared one when several end the graph).

        Args:
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

        Raises:
            ConfigurationError: the graph is invalid, has nothing to start, or routing named an unknown task.
            TypeError: ``hooks`` holds something that is not a Hook subclass.
        """
        deps = self.dependencies()
        if not deps:
            raise ConfigurationError(f"Network '{self.name}' has no tasks")
        if self.router is None and all(d is None for d in deps.values()):
            raise ConfigurationError(f"Network '{self.name}' has no task to start: every task is optional "
                                     "and there is no router")
        for task in self.tasks.values():
            self._check_nesting(task.robot)
        handlers = normalize_hooks(hooks)
        params = dict(run_context)
        if message is not None:
            params["message"] = message
        inherited = params.get("network_config")  # from the network this one is nested in
        params.update(network_memory=self.memory, network=self)
        config = inherited.merge(self.config) if isinstance(inherited, RunConfig) else self.config
        if not config.is_empty:
            params["network_config"] = config
        if handlers:
            params["hooks"] = handlers
        if on_content is not None:
            params["on_content"] = on_content
        emitter = EventEmitter(on_event, run_id=run_id) if on_event is not None else None
        run = _Run(self, FlowResult(params, context={"run_params": params}), deps, emitter)

        def execute() -> Any:
            return run_hooked("network_run", run.execute, network=self, per_run_hooks=handlers, context=params,
                              memory=self.memory, config=self.config)

        if emitter is None:
            return await execute()
        emitter.emit(streaming.RUN_STARTED, network=self.name, message=None if message is None else str(message))
        try:
            result = await execute()
        except BaseException as exc:
            emitter.emit(streaming.RUN_FAILED, network=self.name, error=str(exc), error_type=type(exc).__name__)
            emitter.emit(streaming.STREAM_ENDED)
            raise
        emitter.emit(streaming.RUN_COMPLETED, network=self.name, reply=_reply(result.value),
                     tasks=list(run.results))
        emitter.emit(streaming.STREAM_ENDED)
        return result

    def run(self, message: Any = None, **run_context: Any) -> FlowResult:
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
        message, options = extract_run_context(result)
        options.pop("task", None)  # the outer task: the inner tasks set their own
        try:
            inner = await self.arun(message, **options)
        except Exception as exc:
            failed = error_result(self.name, exc)
            inner = FlowResult(failed, context={"run_params": result.context.get("run_params") or {}},
                               errors={self.name: [str(failed.reply)]})
        step = result.with_context(self.name, inner).continue_(inner.value)
        for key, messages in inner.errors.items():
            for text in messages:
                step = step.with_error(key, text)
        return step

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
        if not callable(handler):
            raise ValueError("Block required for on_broadcast")
        self._broadcast_handlers.append(handler)
        return handler

    def broadcast(self, payload: Any) -> Network:
        """Send ``{"payload", "network", "timestamp"}`` to every handler, then set it in memory.

        A sync handler runs at once; a coroutine handler runs as a task on the running loop (or to its end
        on RobotLab's loop when there is none). A handler that raises is logged. The envelope is stored
        under :data:`BROADCAST_KEY`, so ``memory.subscribe("_network_broadcast", ...)`` sees it too.
        """
        envelope = {"payload": payload, "network": self.name, "timestamp": datetime.now(UTC).isoformat()}
        for handler in list(self._broadcast_handlers):
            try:
                answer = handler(envelope)
                if inspect.isawaitable(answer):
                    self._spawn(answer)
            except Exception as exc:
                logger.warning("Network '%s': broadcast handler failed: %s", self.name, exc)
        self.memory.set(BROADCAST_KEY, envelope)
        return self

    def _spawn(self, awaitable: Any) -> None:
        async def guarded() -> None:
            try:
                await awaitable
            except Exception as exc:
                logger.warning("Network '%s': broadcast handler failed: %s", self.name, exc)

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run_sync(guarded())
            return
        task = asyncio.ensure_future(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- hooks ---------------------------------------------------------------------------
    def on(self, handler: type[Hook], *, context: Mapping[str, Any] | None = None) -> Registration:
        """Register a :class:`~robotlab.hooks.Hook` subclass for this network's ``network_run`` and ``task``
        families and for the runs, tool calls and model calls of its robots."""
        return self.hooks.on(handler, context=context)

    # -- robots --------------------------------------------------------------------------
    @property
    def crew(self) -> list[Any]:
        """The robots, in task order (robots added with :meth:`add_robot` last); a nested network
        contributes its own crew in its place."""
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
        """Add a robot to the crew under its own name, without a task.

        Raises:
            ValueError: the name is taken (``"Robot '<name>' already exists in network '<network>'"``).
        """
        if robot.name in self.robots:
            raise ValueError(f"Robot '{robot.name}' already exists in network '{self.name}'")
        self.robots[robot.name] = robot
        return self

    def remove_robot(self, name: str) -> Any:
        """Remove and return the robot under ``name`` (or ``None``); its task, if any, stays."""
        return self.robots.pop(str(name), None)

    # -- introspection -------------------------------------------------------------------
    @property
    def optional_tasks(self) -> list[str]:
        """The tasks that run only when activated."""
        return [n for n, d in self._depends_on.items() if d is None]

    def phases(self) -> list[list[str]]:
        """The required tasks grouped by depth: each phase can start once the previous ones are done."""
        deps = self.dependencies()
        depth: dict[str, int] = {}

        def level(task: str) -> int:
            if task not in depth:
                depth[task] = 1 + max((level(d) for d in deps[task] or []), default=-1)
            return depth[task]

        phases: list[list[str]] = []
        for task in (t for t, d in deps.items() if d is not None):
            index = level(task)
            phases.extend([] for _ in range(index + 1 - len(phases)))
            phases[index].append(task)
        return phases

    @property
    def execution_plan(self) -> str:
        """The phases as text, then the optional tasks."""
        lines = [f"Execution plan for network '{self.name}':"]
        for number, phase in enumerate(self.phases(), 1):
            kind = " (parallel)" if len(phase) > 1 else ""
            lines.append(f"  Phase {number}{kind}: {', '.join(phase)}")
        if self.optional_tasks:
            lines.append(f"  Optional (activated by routing): {', '.join(self.optional_tasks)}")
        return "\n".join(lines)

    def _label(self, task: str) -> str:
        robot_name = getattr(self.tasks[task].robot, "name", None)
        return task if robot_name in (None, task) else f"{task} ({robot_name})"

    def to_mermaid(self) -> str:
        """A Mermaid flowchart of the graph; optional tasks are drawn dashed."""
        deps = self.dependencies()
        lines = ["flowchart TD"]
        lines += [f'    {_node_id(t)}["{self._label(t)}"]' for t in deps]
        lines += [f"    {_node_id(d)} --> {_node_id(t)}" for t, ds in deps.items() for d in ds or []]
        if self.optional_tasks:
            lines.append("    classDef optional stroke-dasharray: 5 5")
            lines.append(f"    class {','.join(_node_id(t) for t in self.optional_tasks)} optional")
        return "\n".join(lines)

    def to_dot(self) -> str:
        """The graph in Graphviz DOT; optional tasks are dashed."""
        deps = self.dependencies()
        lines = [f'digraph "{self.name}" {{', "  rankdir=TB;"]
        for task, ds in deps.items():
            style = ", style=dashed" if ds is None else ""
            lines.append(f'  "{task}" [label="{self._label(task)}"{style}];')
        lines += [f'  "{d}" -> "{t}";' for t, ds in deps.items() for d in ds or []]
        lines.append("}")
        return "\n".join(lines)

    def visualize(self) -> None:
        """Print :meth:`to_mermaid`."""
        print(self.to_mermaid())

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
