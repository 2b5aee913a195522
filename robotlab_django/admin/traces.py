"""A run's trace in the admin: the waterfall of its spans on its page, each bar linking to its transcript line.

:func:`run_trace` gathers what a result's page draws (:meth:`RobotResultAdmin.trace_display
<robotlab_django.admin.results.RobotResultAdmin.trace_display>`): the spans kept for the row and, for a network
turn, those of its task rows (a distributed turn keeps each task's spans on the task's row), laid out by
:func:`robotlab_django.tracing.waterfall.waterfall`. Each bar links to the line of the transcript it made
(:class:`StepLinks`): a model call to the assistant message it answered with, a tool call to its call (by
``gen_ai.tool.call.id``), a robot run to its first line, on the page of the row that holds that transcript. The
spans linked to spans of other runs (an earlier attempt, the run a re-run repeats) are listed with links to those
runs. Three queries at most, whatever the number of spans or tasks: the task rows, the spans, the linked spans.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.utils.safestring import SafeString

from robotlab_django.runs.transcript import TranscriptItem, run_items
from robotlab_django.tracing.waterfall import Bar, Waterfall, duration_text, operation, waterfall

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult, RunSpan

__all__ = ["MAX_SPANS", "Linked", "RunTrace", "StepLinks", "run_trace", "span_model_of"]

#: The most spans one page draws (the first ones, by start); a longer trace says how many it left out.
MAX_SPANS = 1000


def span_model_of(result_model: type[models.Model]) -> type[RunSpan] | None:
    """The span model whose ``result`` points at ``result_model`` (its ``spans`` relation), or ``None``."""
    try:
        relation = result_model._meta.get_field("spans")
    except FieldDoesNotExist:
        return None
    found = relation.related_model
    return cast("type[RunSpan]", found) if isinstance(found, type) and issubclass(found, models.Model) else None


def _agent_name(span: RunSpan) -> str:
    found = (span.attributes or {}).get("gen_ai.agent.name")
    return str(found) if found else str(span.name).removeprefix("invoke_agent ")


class StepLinks:
    """Where each span's bar links: the transcript line it made, on the page of the row that holds it.

    Args:
        page: The row whose page draws the trace (its own lines are linked within the page).
        rows: The rows the spans belong to, by primary key (the page's row and its task rows).
        spans: The spans drawn.
        url: The admin URL of a row's page, from its primary key.
    """

    def __init__(self, page: RobotResult, rows: dict[int, RobotResult], spans: list[RunSpan],
                 url: Callable[[int], str]) -> None:
        self.page, self.rows, self.url = page, rows, url
        self.by_id = {span.span_id: span for span in spans}
        self._agents: dict[str, Any] = {}
        self._items: dict[Any, list[TranscriptItem]] = {}
        self.owner: dict[str, Any] = {}  # agent span id -> the row of its transcript
        self.ordinal: dict[str, int] = {}  # chat span id -> its place among its row's model calls
        self._assign(sorted(spans, key=lambda s: (s.started_at, s.span_id)))

    def agent(self, span: RunSpan) -> RunSpan | None:
        """The nearest ``invoke_agent`` span at or above ``span`` (``None`` when there is none)."""
        path: list[Any] = []
        seen: set[str] = set()
        current: RunSpan | None = span
        found: RunSpan | None = None
        while current is not None and current.span_id not in seen:
            if current.span_id in self._agents:
                found = self._agents[current.span_id]
                break
            path.append(current)
            seen.add(current.span_id)
            if operation(current) == "invoke_agent":
                found = current
                break
            current = self.by_id.get(current.parent_span_id)
        for visited in path:
            self._agents[visited.span_id] = found
        return found

    def _assign(self, spans: list[Any]) -> None:
        """Each robot run's span to its row; each model call to its number among its row's model calls."""
        taken: dict[tuple[Any, str], int] = {}
        calls: dict[Any, int] = {}
        for span in spans:
            if operation(span) == "invoke_agent":
                own, name = self.rows.get(span.result_id), _agent_name(span)
                if own is not None and own.robot_name == name:
                    self.owner[span.span_id] = own
                    continue
                tasks = sorted((row for row in self.rows.values() if row.parent_id == span.result_id
                                and row.robot_name == name), key=lambda row: (row.sequence_number, row.pk))
                index = taken.get((span.result_id, name), 0)
                if index < len(tasks):  # a turn run in one process: its robots' rows are its task rows
                    taken[(span.result_id, name)] = index + 1
                    self.owner[span.span_id] = tasks[index]
        for span in spans:
            if operation(span) == "chat":
                agent = self.agent(span)
                row = self.owner.get(agent.span_id) if agent is not None else None
                if row is not None:
                    calls[row.pk] = calls.get(row.pk, 0) + 1
                    self.ordinal[span.span_id] = calls[row.pk]

    def items(self, row: RobotResult) -> list[TranscriptItem]:
        """``row``'s transcript lines, as its page lists them."""
        if row.pk not in self._items:
            self._items[row.pk] = run_items(row)
        return self._items[row.pk]

    def line(self, row: RobotResult, span: RunSpan) -> int | None:
        """The number of ``span``'s line in ``row``'s transcript (1 for the first), or ``None``."""
        kind, items = operation(span), self.items(row)
        call_id = (span.attributes or {}).get("gen_ai.tool.call.id")
        if kind == "execute_tool" and call_id:
            return next((n for n, item in enumerate(items, 1) if item.kind == "tool_call"
                         and item.call_id == str(call_id)), None)
        if kind == "chat" and span.span_id in self.ordinal:
            step = self.ordinal[span.span_id]
            return next((n for n, item in enumerate(items, 1) if item.step == step and item.kind != "tool_result"),
                        None)
        if kind == "invoke_agent" and span.span_id in self.owner:
            return 1 if items else None
        return None

    def __call__(self, span: RunSpan) -> str | None:
        """The URL ``span``'s bar links to, or ``None``."""
        agent = self.agent(span)
        row = self.owner.get(agent.span_id) if agent is not None else None
        number = self.line(row, span) if row is not None else None
        if row is None or number is None:
            own = self.rows.get(span.result_id)
            if own is None or own.pk == self.page.pk:
                return None
            return self.url(own.pk)  # a task's job: the task's page
        anchor = f"#robotlab-step-{row.pk}-{number}"
        return anchor if row.pk == self.page.pk else self.url(row.pk) + anchor


@dataclass(frozen=True)
class Linked:
    """A span linked to a span of another run: what it is, what it links to and that run's page."""

    span: str
    relation: str
    target: str
    url: str | None


@dataclass
class RunTrace:
    """What a result's page shows of its trace."""

    chart: Waterfall
    count: int
    more: bool = False
    trace_ids: list[str] = field(default_factory=list)
    linked: list[Linked] = field(default_factory=list)

    @property
    def slowest(self) -> Bar | None:
        """The slowest span that did the work (marked on the chart)."""
        return next((bar for bar in self.chart.bars if bar.slowest), None)

    @property
    def costliest(self) -> Bar | None:
        """The most expensive span that did the work (marked on the chart)."""
        return next((bar for bar in self.chart.bars if bar.costliest), None)

    @property
    def slowest_text(self) -> str:
        """``name (duration, ...)`` of the slowest span, or ``""``."""
        bar = self.slowest
        return f"{bar.span.name} ({bar.figures(workers=True)})" if bar is not None else ""

    @property
    def costliest_text(self) -> str:
        """``name (duration, tokens, cost, ...)`` of the most expensive span, or ``""``."""
        bar = self.costliest
        return f"{bar.span.name} ({bar.figures(workers=True)})" if bar is not None else ""

    @property
    def duration(self) -> str:
        """From the first span's start to the last end."""
        return duration_text(self.chart.seconds) if self.count else ""

    def svg(self) -> SafeString:
        """The waterfall's SVG (every label escaped)."""
        return self.chart.svg(title="Trace")


def _linked(spans: Sequence[Any], model: type[RunSpan], url: Callable[[Any], str]) -> list[Linked]:
    """The links of ``spans`` to spans outside them, with the page of the run each leads to."""
    ours = {(span.trace_id, span.span_id) for span in spans}
    wanted = [(span, (str(link.get("trace_id")), str(link.get("span_id"))), str(link.get("relation") or "linked"))
              for span in spans for link in (span.links or []) if isinstance(link, dict)]
    wanted = [(span, key, relation) for span, key, relation in wanted if key not in ours]
    if not wanted:
        return []
    targets = model._default_manager.filter(trace_id__in={key[0] for _s, key, _r in wanted},
                                            span_id__in={key[1] for _s, key, _r in wanted})
    found = {(target.trace_id, target.span_id): target
             for target in targets.only("trace_id", "span_id", "name", "result_id")}
    shown = []
    for span, key, relation in wanted:
        target = found.get(key)
        label = (f"{target.name} of run {target.result_id}" if target is not None
                 else f"span {key[1]} of trace {key[0]} (not kept)")
        shown.append(Linked(str(span.name), relation, label, url(target.result_id) if target is not None else None))
    return shown


def run_trace(row: RobotResult, url: Callable[[int], str], *, limit: int = MAX_SPANS) -> RunTrace:
    """The trace ``row``'s page draws: its spans and, for a network turn, its task rows' spans.

    Args:
        row: A result row (a run, a network turn or one of a turn's task rows).
        url: The admin URL of a row's page, from its primary key.
        limit: The most spans drawn.
    """
    model = span_model_of(type(row))
    if model is None:
        return RunTrace(chart=waterfall([]), count=0)
    rows = {row.pk: row, **{task.pk: task for task in row.task_rows.order_by("sequence_number", "pk")}}
    found = list(model._default_manager.filter(result_id__in=list(rows))
                 .order_by("started_at", "pk")[:limit + 1])
    spans, more = found[:limit], len(found) > limit
    links = StepLinks(row, rows, spans, url)
    return RunTrace(chart=waterfall(spans, link=links), count=len(spans), more=more,
                    trace_ids=list(dict.fromkeys(span.trace_id for span in spans)),
                    linked=_linked(spans, model, url))
