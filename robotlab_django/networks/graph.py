"""A network turn's task graph as an SVG picture, for the admin: tasks, arrows, each coloured by status.

:func:`turn_graph` reads the turn's stored state (``turn_state``, a :class:`robotlab.network.TurnState`)
and its task rows (``parent`` = the turn), and lays the tasks out in columns by depth; each box names the
task and its robot, and shows its worker (host and pid), attempts, tokens, cost and duration. Every text
in the picture goes through :func:`django.utils.html.escape` (a task or worker name is data, never markup).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["COLOURS", "TaskBox", "task_boxes", "turn_graph"]

#: Box fill per status.
COLOURS = {"completed": "#d4edda", "running": "#cce5ff", "queued": "#fff3cd", "retrying": "#ffe8a1",
           "failed": "#f8d7da", "skipped": "#e2e3e5", "pending": "#ffffff"}
_WIDTH, _HEIGHT, _GAP_X, _GAP_Y, _PAD = 230, 92, 60, 18, 10


@dataclass
class TaskBox:
    """One task of the picture: where it stands and what its row says."""

    name: str
    status: str
    parents: list[str]
    depth: int = 0
    row: RobotResult | None = None
    lines: list[str] = field(default_factory=list)


def _depths(deps: dict[str, list[str] | None], parents: dict[str, list[str]]) -> dict[str, int]:
    """Each task's column: one right of its deepest parent (the tasks that fed it, else its dependencies)."""
    depth: dict[str, int] = {}

    def level(name: str, seen: frozenset[str]) -> int:
        if name not in depth:
            feeding = parents.get(name, deps.get(name) or [])
            depth[name] = 1 + max((level(p, seen | {name}) for p in feeding if p not in seen and p in deps),
                                  default=-1)
        return depth[name]

    for name in deps:
        level(name, frozenset())
    return depth


def _row_lines(row: RobotResult | None) -> list[str]:
    if row is None:
        return []
    worker = f"{row.worker} pid {row.worker_pid}" if row.worker else "no worker yet"
    cost = Decimal(row.cost or 0)
    duration = "" if row.duration is None else f", {row.duration:.2f} s"
    return [worker, f"attempts {row.attempts}, {row.input_tokens + row.output_tokens} tokens",
            f"${cost:.6f}{duration}"]


def task_boxes(turn: RobotResult) -> list[TaskBox]:
    """The boxes of ``turn``'s tasks, in declaration order (``[]`` when the turn stored no state)."""
    state = turn.turn_state or {}
    if not state.get("dependencies"):
        return []
    deps: dict[str, list[str] | None] = dict(state["dependencies"])
    parents = {name: list(feeding) for name, feeding, _how in state.get("started", [])}
    status = dict(state.get("status") or {})
    rows = {row.task_name: row for row in turn.task_rows.order_by("pk")}
    depth = _depths(deps, parents)
    boxes = []
    for name in deps:
        row = rows.get(name)
        shown = str(row.status) if row is not None and status.get(name) != "skipped" else status.get(name, "pending")
        boxes.append(TaskBox(name, shown, parents.get(name, deps[name] or []), depth[name], row, _row_lines(row)))
    return boxes


def turn_graph(turn: RobotResult) -> SafeString:
    """An inline ``<svg>`` of ``turn``'s task graph (empty when it has no stored state)."""
    boxes = task_boxes(turn)
    if not boxes:
        return mark_safe("")  # noqa: S308 - a constant
    columns: dict[int, list[TaskBox]] = {}
    for box in boxes:
        columns.setdefault(box.depth, []).append(box)
    where: dict[str, tuple[int, int]] = {}
    for column, members in columns.items():
        for index, box in enumerate(members):
            where[box.name] = (_PAD + column * (_WIDTH + _GAP_X), _PAD + index * (_HEIGHT + _GAP_Y))
    width = _PAD * 2 + (max(columns) + 1) * (_WIDTH + _GAP_X) - _GAP_X
    height = _PAD * 2 + max(len(m) for m in columns.values()) * (_HEIGHT + _GAP_Y) - _GAP_Y
    parts = [f'<svg class="robotlab-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="task graph">',
             '<defs><marker id="robotlab-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" '
             'markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>']
    for box in boxes:
        x, y = where[box.name]
        for parent in box.parents:
            if parent in where:
                px, py = where[parent]
                parts.append(f'<line x1="{px + _WIDTH}" y1="{py + _HEIGHT // 2}" x2="{x}" y2="{y + _HEIGHT // 2}" '
                             'stroke="#555" marker-end="url(#robotlab-arrow)"/>')
    for box in boxes:
        x, y = where[box.name]
        robot = getattr(box.row, "robot_name", "") or ""
        title = box.name if not robot or robot == box.name else f"{box.name} ({robot})"
        parts.append(f'<g class="robotlab-task robotlab-{escape(box.status)}">'
                     f'<rect x="{x}" y="{y}" width="{_WIDTH}" height="{_HEIGHT}" rx="6" '
                     f'fill="{COLOURS.get(box.status, "#ffffff")}" stroke="#333"/>'
                     f'<text x="{x + 8}" y="{y + 18}" font-weight="bold" font-size="13">{escape(title)}</text>'
                     f'<text x="{x + 8}" y="{y + 34}" font-size="12">{escape(box.status)}</text>')
        for offset, line in enumerate(box.lines):
            parts.append(f'<text x="{x + 8}" y="{y + 50 + 14 * offset}" font-size="11">{escape(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 - every text above is escaped
