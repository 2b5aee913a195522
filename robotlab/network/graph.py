"""The dependency graph of a network: parsing ``depends_on``, expanding groups, checking cycles and drawing it.

The graph is a mapping ``task name -> dependencies`` in declaration order, where the dependencies are a
list of task names (``[]`` for a root) or ``None`` for an optional task (one that runs only when routing
activates it). :class:`~robotlab.network.Network` builds it; :class:`~robotlab.network.turn.TurnState`
schedules it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from ..errors import ConfigurationError

__all__ = ["OPTIONAL", "Dependencies", "expand", "node_id", "parse_depends_on", "phases", "plan_text", "to_dot",
           "to_mermaid"]

#: The ``depends_on`` value of a task that runs only when activated.
OPTIONAL = "optional"

#: ``task name -> dependency names`` (``[]`` for a root, ``None`` for an optional task), in declaration order.
Dependencies = dict[str, list[str] | None]


def parse_depends_on(task: str, depends_on: object) -> list[str] | None:
    """``None`` for an optional task, else the dependency names (``[]`` for a root).

    Raises:
        ConfigurationError: ``"optional"`` is combined with task names.
        TypeError: ``depends_on`` is neither ``"none"``, ``"optional"``, a name nor a list.
    """
    if depends_on is None or (isinstance(depends_on, str) and depends_on == "none"):
        return []
    if isinstance(depends_on, str):
        return None if depends_on == OPTIONAL else [depends_on]
    if isinstance(depends_on, Iterable):
        names = [str(getattr(d, "name", d)) for d in depends_on]
        if OPTIONAL in names:
            raise ConfigurationError(f"Task '{task}': depends_on='optional' cannot be combined with task names")
        return names
    raise TypeError(f"Task '{task}': depends_on must be 'none', 'optional', a task name or a list, got {depends_on!r}")


def expand(network: str, declared: Mapping[str, list[str] | None], groups: Mapping[str, list[str]]) -> Dependencies:
    """Each task's dependencies with group names replaced by their tasks, checked.

    Args:
        network: The network's name (for the error messages).
        declared: The tasks' dependencies as declared (task or group names).
        groups: The :meth:`~robotlab.network.Network.parallel` groups, name -> task names.

    Raises:
        ConfigurationError: a dependency names no task or group, or the dependencies form a cycle.
    """
    expanded: Dependencies = {}
    for task, deps in declared.items():
        if deps is None:
            expanded[task] = None
            continue
        unknown = [d for d in deps if d not in declared and d not in groups]
        if unknown:
            raise ConfigurationError(f"Task '{task}' in network '{network}' depends on unknown task(s): "
                                     f"{', '.join(repr(u) for u in unknown)}")
        names = [m for d in deps for m in groups.get(d, [d])]
        expanded[task] = list(dict.fromkeys(names))
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(task: str) -> None:
        state[task] = 1
        path.append(task)
        for dep in expanded[task] or []:
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep):], dep]
                raise ConfigurationError(f"Network '{network}' has a dependency cycle: {' -> '.join(cycle)}")
            if dep not in state:
                visit(dep)
        path.pop()
        state[task] = 2

    for task in expanded:
        if task not in state:
            visit(task)
    return expanded


def phases(deps: Mapping[str, list[str] | None]) -> list[list[str]]:
    """The required tasks grouped by depth: each phase can start once the previous ones are done."""
    depth: dict[str, int] = {}

    def level(task: str) -> int:
        if task not in depth:
            depth[task] = 1 + max((level(d) for d in deps[task] or []), default=-1)
        return depth[task]

    grouped: list[list[str]] = []
    for task in (t for t, d in deps.items() if d is not None):
        index = level(task)
        grouped.extend([] for _ in range(index + 1 - len(grouped)))
        grouped[index].append(task)
    return grouped


def plan_text(network: str, deps: Mapping[str, list[str] | None]) -> str:
    """The phases as text (``Phase 1 (parallel): a, b``), then the optional tasks."""
    lines = [f"Execution plan for network '{network}':"]
    for number, phase in enumerate(phases(deps), 1):
        kind = " (parallel)" if len(phase) > 1 else ""
        lines.append(f"  Phase {number}{kind}: {', '.join(phase)}")
    optional = [t for t, d in deps.items() if d is None]
    if optional:
        lines.append(f"  Optional (activated by routing): {', '.join(optional)}")
    return "\n".join(lines)


def node_id(name: str) -> str:
    """``name`` as a Mermaid node id (non-word characters become ``_``)."""
    return re.sub(r"\W", "_", name) or "_"


def to_mermaid(deps: Mapping[str, list[str] | None], labels: Mapping[str, str]) -> str:
    """A Mermaid flowchart of the graph; optional tasks are drawn dashed.

    Args:
        deps: The expanded dependencies.
        labels: Each task's label.
    """
    optional = [t for t, d in deps.items() if d is None]
    lines = ["flowchart TD"]
    lines += [f'    {node_id(t)}["{labels[t]}"]' for t in deps]
    lines += [f"    {node_id(d)} --> {node_id(t)}" for t, ds in deps.items() for d in ds or []]
    if optional:
        lines.append("    classDef optional stroke-dasharray: 5 5")
        lines.append(f"    class {','.join(node_id(t) for t in optional)} optional")
    return "\n".join(lines)


def to_dot(network: str, deps: Mapping[str, list[str] | None], labels: Mapping[str, str]) -> str:
    """The graph in Graphviz DOT; optional tasks are dashed."""
    lines = [f'digraph "{network}" {{', "  rankdir=TB;"]
    for task, ds in deps.items():
        style = ", style=dashed" if ds is None else ""
        lines.append(f'  "{task}" [label="{labels[task]}"{style}];')
    lines += [f'  "{d}" -> "{t}";' for t, ds in deps.items() for d in ds or []]
    lines.append("}")
    return "\n".join(lines)
