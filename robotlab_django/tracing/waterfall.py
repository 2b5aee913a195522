"""A trace drawn as a waterfall: one bar per span on a time axis, nested under its parent, as inline SVG.

:func:`waterfall` lays out the stored spans of a run, of a network turn or of a whole trace (rows of
``ROBOTLAB["SPAN_MODEL"]``); :meth:`Waterfall.svg` renders them on the server, like the admin's usage chart
(:mod:`robotlab_django.accounting.usage`): no JavaScript, no inline style, and every name, status message, worker and
link escaped (a robot or tool name is model- or user-chosen text). A bar is coloured by its kind (the GenAI
operation: ``invoke_workflow``, ``invoke_agent``, ``chat``, ``execute_tool``; a Celery ``job``) and its status
(red when it failed, grey and dashed when it never ended: its worker was lost), and carries its duration, tokens,
cost and, when the trace ran on more than one worker, the worker (on the bars whose worker is not their parent's: a
root, a job; every tooltip names it). The slowest and the most expensive of the spans
that did the work (those without children: model calls, tool calls) are marked.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.utils.html import format_html
from django.utils.safestring import SafeString

if TYPE_CHECKING:
    from robotlab_django.models import RunSpan

__all__ = ["COLORS", "ERROR_COLOR", "LOST_COLOR", "OTHER_COLOR", "Bar", "Waterfall", "duration_text", "operation",
           "waterfall"]

#: Bar colours by operation (:func:`operation`); any other span is ``OTHER_COLOR``.
COLORS = {"invoke_workflow": "#b07aa1", "invoke_agent": "#4e79a7", "chat": "#59a14f", "execute_tool": "#f28e2b",
          "job": "#9c755f"}
OTHER_COLOR = "#bab0ac"
#: A failed span's colour, and that of a span that never ended.
ERROR_COLOR = "#e15759"
LOST_COLOR = "#c8c8c8"

WIDTH = 1000
LABELS = 300  # the name column
RIGHT = 190  # room for the figures after the last bar
ROW = 22
TOP = 28
INDENT = 12
CHAR = 6.2  # the width of a character of the figures (11 px), roughly


def _escape(text: object) -> str:
    """``text`` escaped for SVG text and attribute values (``&``, ``<``, ``>``, both quotes)."""
    return html.escape(str(text), quote=True)


def operation(span: RunSpan) -> str:
    """What ``span`` does: its ``gen_ai.operation.name``, ``job`` for a Celery job, else its kind."""
    found = (span.attributes or {}).get("gen_ai.operation.name")
    if isinstance(found, str) and found:
        return found
    return "job" if span.kind == "consumer" else str(span.kind or "internal")


def duration_text(seconds: float) -> str:
    """``0.4 ms``, ``123 ms``, ``1.23 s`` or ``2 min 03 s``."""
    if seconds < 0.001:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


@dataclass
class Bar:
    """One span's bar: the span, its depth in the tree, where it is drawn and what it says."""

    span: Any
    depth: int
    row: int
    x: float = 0.0
    width: float = 0.0
    seconds: float | None = None
    color: str = OTHER_COLOR
    leaf: bool = True
    slowest: bool = False
    costliest: bool = False
    moved: bool = True  # its worker is not its parent's (a root, a job on another worker)

    @property
    def tokens(self) -> int:
        """Input plus output tokens (0 when the span has none)."""
        return int(self.span.input_tokens or 0) + int(self.span.output_tokens or 0)

    @property
    def cost(self) -> Decimal:
        """The span's cost (0 when it has none)."""
        return Decimal(self.span.cost or 0)

    @property
    def worker(self) -> str:
        """``host (pid N)``, or ``""``."""
        worker, pid = str(self.span.worker or ""), self.span.worker_pid
        return f"{worker} (pid {pid})" if worker and pid else worker

    def figures(self, *, workers: bool) -> str:
        """The text after the bar: duration, tokens, cost and (``workers``) the worker."""
        parts = [duration_text(self.seconds) if self.seconds is not None else "never ended"]
        if self.tokens:
            parts.append(f"{self.tokens:,} tokens")
        if self.cost:
            parts.append(f"${self.cost:,.4f}")
        if workers and self.worker:
            parts.append(self.worker)
        return " · ".join(parts)

    def title(self) -> str:
        """The tooltip: the name, status, and every figure."""
        span = self.span
        lines = [str(span.name), f"status: {span.status}" + (f" ({span.status_message})" if span.status_message
                                                              else "")]
        lines.append(self.figures(workers=True))
        if self.slowest:
            lines.append("the slowest span")
        if self.costliest:
            lines.append("the most expensive span")
        return "\n".join(lines)


@dataclass
class Waterfall:
    """The laid-out trace: its bars in tree order, the time it spans and the chart's size."""

    bars: list[Bar]
    start: dt.datetime | None
    seconds: float
    width: int = WIDTH
    height: int = TOP
    ticks: list[tuple[float, str]] = field(default_factory=list)
    link: Callable[[Any], str | None] | None = None

    @property
    def is_empty(self) -> bool:
        """Whether there is no span to draw."""
        return not self.bars

    @property
    def workers(self) -> list[str]:
        """The workers the spans ran on, in the order they first appear."""
        return list(dict.fromkeys(bar.worker for bar in self.bars if bar.worker))

    def _bar(self, bar: Bar, workers: bool) -> str:
        span, y = bar.span, TOP + bar.row * ROW
        classes = ["span", f"span-{operation(span)}", f"status-{span.status}"]
        classes += [name for name, on in (("lost", span.ended_at is None), ("slowest", bar.slowest),
                                          ("costliest", bar.costliest)) if on]
        outline = ' stroke="#666666" stroke-dasharray="3 2"' if span.ended_at is None else ""
        marks = " · ".join(name for name, on in (("← slowest", bar.slowest), ("← most expensive", bar.costliest))
                           if on)
        figures = bar.figures(workers=workers and bar.moved) + (f" · {marks}" if marks else "")
        figures_at = self._figures_at(bar, figures, marked=bool(marks))
        body = (f'<text x="{4 + bar.depth * INDENT}" y="{y + 15}" font-size="12">{_escape(span.name)}</text>'
                f'<rect x="{bar.x:.1f}" y="{y + 4}" width="{bar.width:.1f}" height="{ROW - 8}" rx="2" '
                f'fill="{bar.color}"{outline}><title>{_escape(bar.title())}</title></rect>'
                f'<text {figures_at} y="{y + 15}" font-size="11">{_escape(figures)}</text>')
        href = self.link(span) if self.link is not None else None
        if href:
            body = f'<a href="{_escape(href)}">{body}</a>'
        return f'<g class="{_escape(" ".join(classes))}" data-span-id="{_escape(span.span_id)}">{body}</g>\n'

    def _figures_at(self, bar: Bar, figures: str, *, marked: bool) -> str:
        """Where a bar's figures go: after the bar, else before it, else inside it (in white), whichever fits."""
        room = CHAR * len(figures)
        after, before = bar.x + bar.width + 4, bar.x - 4
        ink = "#8b1a1a" if marked else "#444444"
        if after + room <= self.width:
            return f'x="{after:.1f}" fill="{ink}"'
        if before - room >= LABELS:
            return f'x="{before:.1f}" text-anchor="end" fill="{ink}"'
        if bar.width >= room + 8:
            return f'x="{bar.x + 4:.1f}" fill="#ffffff"'
        return f'x="{after:.1f}" fill="{ink}"'  # cut at the edge: the tooltip has it all

    def _legend(self) -> str:
        """The colours in use, under the bars."""
        shown = dict.fromkeys(operation(bar.span) for bar in self.bars)
        keys = [(name, COLORS.get(name, OTHER_COLOR)) for name in shown]
        keys += [(label, color) for label, color, on in (
            ("failed", ERROR_COLOR, any(bar.span.status == "error" for bar in self.bars)),
            ("never ended", LOST_COLOR, any(bar.span.ended_at is None for bar in self.bars))) if on]
        y, x, parts = TOP + len(self.bars) * ROW + 8, 4.0, []
        for label, color in keys:
            parts.append(f'<rect x="{x:.1f}" y="{y}" width="10" height="10" fill="{color}"></rect>'
                         f'<text x="{x + 14:.1f}" y="{y + 9}" font-size="11">{_escape(label)}</text>')
            x += 24 + 7 * len(label)
        return f'<g class="legend">{"".join(parts)}</g>\n'

    def svg(self, title: str = "Trace") -> SafeString:
        """The waterfall as inline SVG; every text and attribute value from a span is escaped."""
        workers = len(self.workers) > 1
        parts = [f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP - 6}" y2="{self.height}" stroke="#e0e0e0"></line>'
                 f'<text x="{x:.1f}" y="{TOP - 10}" font-size="11" text-anchor="middle">{_escape(label)}</text>\n'
                 for x, label in self.ticks]
        parts += [self._bar(bar, workers) for bar in self.bars]
        parts.append(self._legend())
        return format_html('<svg class="robotlab-waterfall" viewBox="0 0 {} {}" width="100%" role="img" '
                           'aria-label="{}" xmlns="http://www.w3.org/2000/svg">\n{}</svg>\n', self.width,
                           self.height, title, SafeString("".join(parts)))  # every text in parts is escaped


def _tree(spans: Sequence[Any]) -> list[tuple[Any, int, bool]]:
    """``(span, depth, leaf)`` in tree order: each span after its parent, siblings by start."""
    ids = {span.span_id for span in spans}
    children: dict[str, list[Any]] = {}
    roots = []
    for span in sorted(spans, key=lambda s: (s.started_at, s.span_id)):
        if span.parent_span_id and span.parent_span_id in ids and span.parent_span_id != span.span_id:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append(span)
    ordered: list[tuple[Any, int, bool]] = []
    seen: set[str] = set()
    stack = [(span, 0) for span in reversed(roots)]
    while stack:
        span, depth = stack.pop()
        if span.span_id in seen:  # a cycle in bad data: drawn once
            continue
        seen.add(span.span_id)
        below = children.get(span.span_id, [])
        ordered.append((span, depth, not below))
        stack.extend((child, depth + 1) for child in reversed(below))
    return ordered


def _ticks(seconds: float, left: float, span: float) -> list[tuple[float, str]]:
    step = max(seconds, 1e-6) / 4
    return [(left + span * index / 4, duration_text(step * index) if index else "0") for index in range(5)]


def waterfall(spans: Iterable[Any], *, now: dt.datetime | None = None,
              link: Callable[[Any], str | None] | None = None, width: int = WIDTH) -> Waterfall:
    """Lay out ``spans`` (span rows: a run's, a turn's, a trace's) as a waterfall.

    Args:
        spans: The spans; a span whose parent is not among them is drawn as a root.
        now: Where a span that never ended stops (the last end among the spans by default).
        link: Gives the URL a span's bar links to (the transcript step of its run), or ``None``.
        width: The chart's width in SVG units.
    """
    given = list(spans)
    if not given:
        return Waterfall(bars=[], start=None, seconds=0.0, width=width, link=link)
    start = min(span.started_at for span in given)
    ends = [span.ended_at for span in given if span.ended_at is not None]
    stop = max([*ends, *(span.started_at for span in given)]) if now is None else now
    total = max((stop - start).total_seconds(), 1e-6)
    plot = width - LABELS - RIGHT
    bars: list[Bar] = []
    by_id: dict[str, Bar] = {}
    for row, (span, depth, leaf) in enumerate(_tree(given)):
        end = span.ended_at or max(stop, span.started_at)
        offset = (span.started_at - start).total_seconds()
        bar = Bar(span=span, depth=depth, row=row, leaf=leaf,
                  seconds=(span.ended_at - span.started_at).total_seconds() if span.ended_at else None,
                  x=LABELS + plot * offset / total,
                  width=max(plot * (end - span.started_at).total_seconds() / total, 1.0))
        bar.color = (LOST_COLOR if span.ended_at is None else ERROR_COLOR if span.status == "error"
                     else COLORS.get(operation(span), OTHER_COLOR))
        parent = by_id.get(span.parent_span_id)
        bar.moved = parent is None or parent.worker != bar.worker  # under its job, a bar says no worker again
        by_id[span.span_id] = bar
        bars.append(bar)
    doers = [bar for bar in bars if bar.leaf and bar.seconds is not None] or bars  # model calls, tool calls
    slowest = max(doers, key=lambda bar: bar.seconds or 0.0)
    if slowest.seconds:
        slowest.slowest = True
    costliest = max(doers, key=lambda bar: bar.cost)
    if costliest.cost > 0:
        costliest.costliest = True
    return Waterfall(bars=bars, start=start, seconds=total, width=width, height=TOP + (len(bars) + 1) * ROW + 4,
                     ticks=_ticks(total, LABELS, plot), link=link)
