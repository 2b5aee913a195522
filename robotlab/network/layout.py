"""A network's layout: its tasks, groups and dependencies, checked and drawn.

:class:`Layout` is a base of :class:`~robotlab.network.Network`: :meth:`Layout.task` and :meth:`Layout.parallel`
add tasks, :meth:`Layout.validate` checks the graph (unknown dependencies, cycles, a network inside itself),
and :meth:`Layout.phases`, :meth:`Layout.to_mermaid` and :meth:`Layout.to_dot` describe it. The graph
algorithms themselves are in :mod:`robotlab.network.graph`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self

from ..bus import BusPoller
from ..errors import ConfigurationError
from ..memory import Memory
from ..run_config import RunConfig
from ..task import Step, Task
from . import graph

__all__ = ["Layout"]


def _path_to(start: object, target: Layout, seen: set[int]) -> list[str] | None:
    """The names of the networks from ``start`` down to ``target`` through nested tasks, or ``None``."""
    if start is target:
        return [target.name]
    if not isinstance(start, Layout) or id(start) in seen:
        return None
    seen.add(id(start))
    for task in start.tasks.values():
        path = _path_to(task.robot, target, seen)
        if path is not None:
            return [start.name, *path]
    return None


class Layout:
    """The tasks of a network and their dependency graph (see :class:`~robotlab.network.Network`)."""

    name: str
    robots: dict[str, Any]
    tasks: dict[str, Task]
    bus_poller: BusPoller
    _depends_on: dict[str, list[str] | None]
    _groups: dict[str, list[str]]

    # -- building ------------------------------------------------------------------------
    def task(
        self,
        name: str,
        robot: Step,
        *,
        context: Mapping[str, Any] | None = None,
        mcp: object = "none",
        tools: object = "none",
        memory: Memory | Mapping[str, Any] | None = None,
        config: RunConfig | Mapping[str, Any] | None = None,
        depends_on: str | Iterable[str] | None = "none",
        poller_group: str = "default",
    ) -> Self:
        """Add ``robot`` as the task ``name``; returns the network (so calls chain).

        Args:
            name: The task's name, unique in the network.
            robot: The robot that runs the task, or another :class:`Network` run as this one task (see
                :meth:`call`).
            context: Run parameters merged into the task's (see :class:`~robotlab.task.Task`).
            mcp: The task's MCP servers setting.
            tools: The task's tools setting.
            memory: The task's own memory (else the network's).
            config: The task's :class:`~robotlab.run_config.RunConfig` layer.
            depends_on: ``"none"`` (a root), a task or :meth:`parallel` group name, a list of them, or
                ``"optional"`` (runs only when activated by routing).
            poller_group: The bus poller group label of the robot.

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
        deps = graph.parse_depends_on(name, depends_on)
        self.tasks[name] = Task(name=name, robot=robot, context=context, mcp=mcp, tools=tools, memory=memory,
                                config=config, network=self)
        self._depends_on[name] = deps
        self.robots[name] = robot
        self.bus_poller.add_group(poller_group)
        if callable(assign := getattr(robot, "assign_bus_poller", None)):  # a robot's; other steps have none
            assign(self.bus_poller, group=poller_group)
        return self

    def parallel(self, name: str | None = None, robots: Mapping[str, Any] | Sequence[Any] = (), *,
                 depends_on: str | Iterable[str] | None = "none") -> Self:
        """Add ``robots`` (``{task: robot}``, or robots named as their tasks) alike; later tasks may need ``name``."""
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
        return graph.expand(self.name, self._depends_on, self._groups)

    def _check_nesting(self, runnable: object) -> None:
        path = _path_to(runnable, self, set())
        if path is not None:
            raise ConfigurationError(f"Network '{self.name}' cannot contain itself: "
                                     f"{' -> '.join([self.name, *path])}")

    def validate(self) -> Self:
        """Check the graph now, as :meth:`arun` does (unknown dependencies, cycles, a network in itself)."""
        self.dependencies()
        for task in self.tasks.values():
            self._check_nesting(task.robot)
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.validate()

    # -- drawing -------------------------------------------------------------------------
    @property
    def optional_tasks(self) -> list[str]:
        """The tasks that run only when activated."""
        return [n for n, d in self._depends_on.items() if d is None]

    def phases(self) -> list[list[str]]:
        """The required tasks grouped by depth: each phase can start once the previous ones are done."""
        return graph.phases(self.dependencies())

    @property
    def execution_plan(self) -> str:
        """The phases as text, then the optional tasks."""
        return graph.plan_text(self.name, self.dependencies())

    def _labels(self) -> dict[str, str]:
        labels = {}
        for task, spec in self.tasks.items():
            robot_name = getattr(spec.robot, "name", None)
            labels[task] = task if robot_name in (None, task) else f"{task} ({robot_name})"
        return labels

    def to_mermaid(self) -> str:
        """A Mermaid flowchart of the graph; optional tasks are drawn dashed."""
        return graph.to_mermaid(self.dependencies(), self._labels())

    def to_dot(self) -> str:
        """The graph in Graphviz DOT; optional tasks are dashed."""
        return graph.to_dot(self.name, self.dependencies(), self._labels())

    def visualize(self) -> None:
        """Print :meth:`to_mermaid`."""
        print(self.to_mermaid())
