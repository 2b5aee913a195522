"""The evals' charts, as inline SVG built on the server: two runs' scores per case, and scores per day as lines.

Built like the admin's usage charts (:class:`robotlab_django.accounting.usage.Chart`): the geometry is computed
here, numbers go in as numbers, and every piece of text (case names, version labels, tooltips) goes through
:func:`html.escape` with quotes before it is joined; no JavaScript, no chart library. A case name or a label is
never trusted as markup.
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass, field

from django.utils.html import format_html
from django.utils.safestring import SafeString

from robotlab_django.accounting.usage import PALETTE
from robotlab_django.evals.compare import CaseRow

__all__ = ["BASE_COLOR", "OTHER_COLOR", "Line", "case_bars", "score_lines"]

#: The first run's bars, and the second's.
BASE_COLOR, OTHER_COLOR = PALETTE[0], PALETTE[1]
#: The delta's text: worse, better, unchanged.
_DELTA_COLORS = {"worse": "#ba2121", "better": "#2e7d32"}

WIDTH = 760
_TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _escape(text: object) -> str:
    """``text`` escaped for SVG text and attribute values (``&``, ``<``, ``>``, both quotes)."""
    return html.escape(str(text), quote=True)


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[:length - 1] + "…"


def _svg(title: str, height: int, parts: list[str]) -> SafeString:
    """The ``<svg>`` around ``parts`` (each already escaped), labelled ``title`` (escaped by ``format_html``)."""
    return format_html('<svg class="robotlab-chart" viewBox="0 0 {} {}" width="100%" role="img" aria-label="{}" '
                       'xmlns="http://www.w3.org/2000/svg">\n{}</svg>\n', WIDTH, height, title,
                       SafeString("".join(parts)))  # every text in parts is escaped


def _delta_text(row: CaseRow) -> str:
    delta = row.score_delta
    if delta is None:
        return row.change
    return "=" if row.change == "same" else f"{delta:+.2f}"


def case_bars(rows: list[CaseRow], *, base_label: str, other_label: str, title: str) -> SafeString:
    """Each case's score in both runs as a pair of horizontal bars (first run above), the delta at the right.

    The rows keep their order (the comparison's: worse first); the chart is as tall as they need.
    """
    left, right, top, row_height = 230, 64, 26, 22
    plot = WIDTH - left - right
    height = top + row_height * len(rows) + 8
    parts = []
    for tick in _TICKS:
        x = round(left + plot * tick, 2)
        parts.append(f'<line x1="{x}" x2="{x}" y1="{top - 6}" y2="{height - 8}"></line>\n'
                     f'<text x="{x}" y="{top - 10}" text-anchor="middle">{tick:.2f}</text>\n')
    for index, row in enumerate(rows):
        y = top + row_height * index
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{_escape(_cut(row.name, 36))}'
                     f'<title>{_escape(row.name)}</title></text>\n')
        for offset, side, color, label in ((3, row.base, BASE_COLOR, base_label),
                                           (11, row.other, OTHER_COLOR, other_label)):
            if side is None:
                continue
            width = round(max(plot * min(max(side.score, 0.0), 1.0), 1.0), 2)
            parts.append(f'<rect x="{left}" y="{y + offset}" width="{width}" height="7" fill="{color}">'
                         f'<title>{_escape(f"{row.name} · {label}: {side.score:.2f}")}</title></rect>\n')
        color = _DELTA_COLORS.get(row.change, "currentColor")
        parts.append(f'<text x="{WIDTH - right + 6}" y="{y + 15}" fill="{color}">{_escape(_delta_text(row))}</text>\n')
    return _svg(title, height, parts)


@dataclass
class Line:
    """One series of a line chart: its label and colour, a value (or ``None``) per day, and a tooltip per day."""

    label: str
    color: str
    values: list[float | None]
    notes: list[str] = field(default_factory=list)


def _segments(points: list[tuple[float, float] | None]) -> list[list[tuple[float, float]]]:
    """The runs of consecutive points (a day without a value breaks the line)."""
    found: list[list[tuple[float, float]]] = [[]]
    for point in points:
        if point is None:
            if found[-1]:
                found.append([])
        else:
            found[-1].append(point)
    return [segment for segment in found if segment]


def score_lines(days: list[dt.date], lines: list[Line], *, title: str) -> SafeString:
    """Scores from 0 to 1 per day, one line per series, a dot (with its tooltip) per day that has a value."""
    height, left, right, top, bottom = 240, 48, 12, 12, 36
    plot_width, plot_height = WIDTH - left - right, height - top - bottom
    slot = plot_width / max(len(days) - 1, 1)
    parts = []
    for tick in _TICKS:
        y = round(height - bottom - plot_height * tick, 2)
        parts.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{y}" y2="{y}"></line>\n'
                     f'<text x="{left - 6}" y="{y + 4}" text-anchor="end">{tick:.2f}</text>\n')
    every = max(1, -(-len(days) // 10))
    for position, day in enumerate(days):
        if position % every == 0:
            parts.append(f'<text x="{round(left + slot * position, 2)}" y="{height - bottom + 16}" '
                         f'text-anchor="middle">{_escape(day.strftime("%m-%d"))}</text>\n')
    for line in lines:
        color = _escape(line.color)
        points = [None if value is None else (round(left + slot * position, 2),
                                              round(height - bottom - plot_height * min(max(value, 0.0), 1.0), 2))
                  for position, value in enumerate(line.values)]
        for segment in _segments(points):
            coordinates = " ".join(f"{x},{y}" for x, y in segment)
            parts.append(f'<polyline points="{coordinates}" fill="none" stroke="{color}" stroke-width="2">'
                         f'</polyline>\n')
        for position, point in enumerate(points):
            if point is not None:
                note = line.notes[position] if position < len(line.notes) else ""
                parts.append(f'<circle cx="{point[0]}" cy="{point[1]}" r="3" fill="{color}"><title>'
                             f'{_escape(f"{days[position].isoformat()} {line.label}: {note}")}</title></circle>\n')
    return _svg(title, height, parts)
