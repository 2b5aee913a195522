"""Usage per day by robot and model: one aggregate query, and the geometry of two stacked bar charts.

The admin's usage page renders :class:`UsageReport` as inline SVG from numbers computed here;
every label goes through the template's autoescaping (no JavaScript, no chart library).
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

if TYPE_CHECKING:
    from django.db.models import QuerySet


__all__ = ["PALETTE", "Chart", "Rect", "Series", "UsageReport", "daily_usage"]

#: Series colours, reused in order.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")

WIDTH, HEIGHT = 760, 240


def _escape(text: object) -> str:
    """``text`` escaped for HTML text and attribute values (``&``, ``<``, ``>``, both quotes)."""
    return html.escape(str(text), quote=True)
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 12, 36


@dataclass
class Series:
    """One robot and model pair, with its totals over the period."""

    robot_name: str
    model: str
    color: str
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal = Decimal(0)

    @property
    def label(self) -> str:
        """``robot · model``."""
        return f"{self.robot_name} · {self.model or 'unknown model'}"

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Rect:
    """One bar segment: position, size, colour and its tooltip."""

    x: float
    y: float
    width: float
    height: float
    color: str
    title: str


@dataclass(frozen=True)
class Label:
    """A piece of axis text at a position."""

    x: float
    y: float
    text: str


@dataclass
class Chart:
    """A stacked bar chart: one bar per day, one segment per series."""

    title: str
    width: int = WIDTH
    height: int = HEIGHT
    rects: list[Rect] = field(default_factory=list)
    x_labels: list[Label] = field(default_factory=list)
    y_labels: list[Label] = field(default_factory=list)
    gridlines: list[float] = field(default_factory=list)
    plot_left: int = LEFT
    plot_right: int = WIDTH - RIGHT
    baseline: int = HEIGHT - BOTTOM

    @property
    def is_empty(self) -> bool:
        """Whether the chart has no bars."""
        return not self.rects

    def svg(self) -> SafeString:
        """The chart as inline SVG, every title, label and colour escaped (``html.escape``, quotes included).

        Built in Python rather than by a template loop or ``format_html`` per bar: a 365-day chart of a
        dozen series has some 4,000 bars, which the template engine rendered in 200 ms and
        ``format_html`` in 90 ms; escaping only the text (numbers need none) takes about 10 ms.
        """
        parts = [f'<line x1="{self.plot_left}" x2="{self.plot_right}" y1="{y}" y2="{y}"></line>\n'
                 for y in self.gridlines]
        parts += [f'<text x="{label.x}" y="{label.y}" text-anchor="end">{_escape(label.text)}</text>\n'
                  for label in self.y_labels]
        parts += [f'<rect x="{rect.x}" y="{rect.y}" width="{rect.width}" height="{rect.height}" '
                  f'fill="{_escape(rect.color)}"><title>{_escape(rect.title)}</title></rect>\n' for rect in self.rects]
        parts += [f'<text x="{label.x}" y="{label.y}" text-anchor="middle">{_escape(label.text)}</text>\n'
                  for label in self.x_labels]
        return format_html('<h2>{}</h2>\n<svg class="robotlab-chart" viewBox="0 0 {} {}" width="100%" role="img" '
                           'aria-label="{}" xmlns="http://www.w3.org/2000/svg">\n{}</svg>\n', self.title, self.width,
                           self.height, self.title, SafeString("".join(parts)))  # every text in parts is escaped


@dataclass
class UsageReport:
    """Usage over ``days`` days up to ``end``: series totals and the tokens and cost charts."""

    start: dt.date
    end: dt.date
    days: list[dt.date]
    series: list[Series]
    tokens_chart: Chart
    cost_chart: Chart

    @property
    def total_tokens(self) -> int:
        """Tokens over the period."""
        return sum(series.total_tokens for series in self.series)

    @property
    def total_cost(self) -> Decimal:
        """Cost over the period."""
        return sum((series.cost for series in self.series), Decimal(0))

    @property
    def total_runs(self) -> int:
        """Runs over the period."""
        return sum(series.runs for series in self.series)


def _nice_ceiling(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value:
            return float(step * magnitude)
    return float(10 * magnitude)  # pragma: no cover


def _chart(title: str, days: list[dt.date], series: list[Series], values: dict[tuple[dt.date, int], float],
           fmt: Callable[[float], str]) -> Chart:
    chart = Chart(title=title)
    totals = [sum(values.get((day, index), 0.0) for index in range(len(series))) for day in days]
    top = _nice_ceiling(max(totals, default=0.0))
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(len(days), 1)
    bar = max(slot * 0.7, 1.0)
    for step in range(5):
        value = top * step / 4
        y = HEIGHT - BOTTOM - plot_height * step / 4
        chart.gridlines.append(round(y, 2))
        chart.y_labels.append(Label(LEFT - 6, round(y + 4, 2), fmt(value)))
    every = max(1, -(-len(days) // 10))
    for position, day in enumerate(days):
        x = LEFT + slot * position + (slot - bar) / 2
        if position % every == 0:
            chart.x_labels.append(Label(round(x + bar / 2, 2), HEIGHT - BOTTOM + 16, day.strftime("%m-%d")))
        y = float(HEIGHT - BOTTOM)
        for index, item in enumerate(series):
            value = values.get((day, index), 0.0)
            if value <= 0:
                continue
            height = plot_height * value / top
            y -= height
            chart.rects.append(Rect(round(x, 2), round(y, 2), round(bar, 2), round(height, 2), item.color,
                                    f"{day.isoformat()} {item.label}: {fmt(value)}"))
    return chart


def _tokens(value: float) -> str:
    return f"{int(round(value)):,}"


def _dollars(value: float) -> str:
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def _rows(queryset: QuerySet[Any], start: dt.date, end: dt.date) -> Any:
    """Runs, tokens and cost per day, robot and model: summed from rollups, or aggregated from result rows."""
    if queryset.model._meta.model_name == "usagerollup":  # a few rows per day (robotlab_django.accounting.rollups)
        return (queryset.filter(day__gte=start, day__lte=end).values("day", "robot_name", "model")
                .annotate(runs=Sum("runs"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
                          cost=Sum("cost"))
                .order_by("day", "robot_name", "model"))
    tz = timezone.get_current_timezone()
    since = dt.datetime.combine(start, dt.time.min, tzinfo=tz)
    until = dt.datetime.combine(end + dt.timedelta(days=1), dt.time.min, tzinfo=tz)
    return (queryset.filter(created_at__gte=since, created_at__lt=until)
            .annotate(day=TruncDate("created_at", tzinfo=tz))
            .values("day", "robot_name", "model")
            .annotate(runs=Count("pk"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
                      cost=Sum("cost"))
            .order_by("day", "robot_name", "model"))


def daily_usage(queryset: QuerySet[Any], *, days: int = 30, end: dt.date | None = None) -> UsageReport:
    """Tokens and cost per day by robot and model for ``queryset`` over ``days`` days.

    ``queryset`` holds usage rollups (:class:`~robotlab_django.models.UsageRollup`, what the admin
    reads) or robot results (aggregated on the fly). Days are in the current time zone; ``end``
    (today by default) is the last day shown.
    """
    days = max(1, int(days))
    end = end or timezone.localdate()
    start = end - dt.timedelta(days=days - 1)
    rows = _rows(queryset, start, end)
    index: dict[tuple[str, str], int] = {}
    series: list[Series] = []
    tokens: dict[tuple[dt.date, int], float] = {}
    cost: dict[tuple[dt.date, int], float] = {}
    for row in rows:
        key = (row["robot_name"], row["model"])
        if key not in index:
            index[key] = len(series)
            series.append(Series(robot_name=key[0], model=key[1], color=PALETTE[len(series) % len(PALETTE)]))
        item = series[index[key]]
        day_tokens = int(row["input_tokens"] or 0) + int(row["output_tokens"] or 0)
        day_cost = Decimal(row["cost"] or 0)
        item.runs += int(row["runs"])
        item.input_tokens += int(row["input_tokens"] or 0)
        item.output_tokens += int(row["output_tokens"] or 0)
        item.cost += day_cost
        slot = (row["day"], index[key])
        tokens[slot] = tokens.get(slot, 0.0) + day_tokens
        cost[slot] = cost.get(slot, 0.0) + float(day_cost)
    calendar = [start + dt.timedelta(days=offset) for offset in range(days)]
    return UsageReport(start=start, end=end, days=calendar, series=series,
                       tokens_chart=_chart("Tokens per day", calendar, series, tokens, _tokens),
                       cost_chart=_chart("Cost per day (USD)", calendar, series, cost, _dollars))
