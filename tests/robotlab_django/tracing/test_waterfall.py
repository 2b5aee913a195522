"""The waterfall of a trace: bars nested on a time axis, coloured by kind and status, every label escaped."""

from __future__ import annotations

import datetime as dt
import re
import time
import xml.etree.ElementTree as ET
from decimal import Decimal
from typing import Any

from robotlab_django.models import RunSpan
from robotlab_django.tracing.waterfall import COLORS, ERROR_COLOR, LOST_COLOR, duration_text, waterfall

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
SVG = "{http://www.w3.org/2000/svg}"


def span(span_id: str, name: str, start: float, end: float | None, parent: str = "", **fields: Any) -> RunSpan:
    """An unsaved span row, ``start`` and ``end`` in seconds after T0."""
    operation = name.split(" ")[0]
    attributes = {"gen_ai.operation.name": operation} if operation != "job" else {}
    return RunSpan(trace_id="a" * 32, span_id=span_id.ljust(16, "0"), parent_span_id=parent.ljust(16, "0") if parent
                   else "", name=name, kind=fields.pop("kind", "internal"),
                   started_at=T0 + dt.timedelta(seconds=start),
                   ended_at=None if end is None else T0 + dt.timedelta(seconds=end),
                   status=fields.pop("status", "unset"), attributes=attributes, **fields)


def tool_round() -> list[RunSpan]:
    return [
        span("e", "chat gpt", 1.5, 2.0, "a", kind="client", input_tokens=20, output_tokens=7, cost=Decimal("0.0025")),
        span("a", "invoke_agent calculator", 0.0, 2.0, input_tokens=30, output_tokens=12, cost=Decimal("0.004")),
        span("b", "chat gpt", 0.0, 0.5, "a", kind="client", input_tokens=10, output_tokens=5,
             cost=Decimal("0.0015")),
        span("c", "execute_tool add", 0.5, 1.5, "a"),
    ]


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # well-formed XML, or this raises


def test_bars_are_nested_in_tree_order_on_one_time_axis() -> None:
    chart = waterfall(tool_round())
    assert [(bar.span.name, bar.depth) for bar in chart.bars] == [
        ("invoke_agent calculator", 0), ("chat gpt", 1), ("execute_tool add", 1), ("chat gpt", 1)]
    agent, first, tool, second = chart.bars
    assert chart.seconds == 2.0
    assert agent.x == first.x and tool.x == first.x + first.width  # the tool starts as the first call ends
    assert agent.width == first.width + tool.width + second.width
    assert second.x + second.width == agent.x + agent.width
    assert [bar.row for bar in chart.bars] == [0, 1, 2, 3]
    assert (agent.color, first.color, tool.color) == (COLORS["invoke_agent"], COLORS["chat"], COLORS["execute_tool"])
    assert not agent.leaf and first.leaf


def test_the_slowest_and_the_most_expensive_span_that_did_the_work_are_marked() -> None:
    chart = waterfall(tool_round())
    assert [bar.span.name for bar in chart.bars if bar.slowest] == ["execute_tool add"]  # not the run around it
    assert [bar.span.span_id[:1] for bar in chart.bars if bar.costliest] == ["e"]
    svg = str(chart.svg())
    assert svg.count("← slowest") == 1 and svg.count("← most expensive") == 1
    root = parse(svg)
    marked = {g.get("data-span-id", "")[:1]: g.get("class", "") for g in root.iter(f"{SVG}g")
              if "span" in g.get("class", "").split()}
    assert "slowest" in marked["c"].split() and "costliest" in marked["e"].split()


def test_each_bar_says_its_duration_tokens_and_cost() -> None:
    root = parse(str(waterfall(tool_round()).svg()))
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert "500 ms · 15 tokens · $0.0015" in texts
    assert "2.00 s · 42 tokens · $0.0040" in texts
    assert "1.00 s · ← slowest" in texts
    titles = [t.text or "" for t in root.iter(f"{SVG}title")]
    assert any(title.startswith("execute_tool add\nstatus: unset") for title in titles)


def test_failed_and_lost_spans_are_coloured_by_status() -> None:
    spans = [span("a", "job calculator", 0.0, None, kind="consumer", worker="w1@host", worker_pid=11),
             span("b", "job calculator", 3.0, 4.0, kind="consumer", worker="w2@host", worker_pid=22),
             span("c", "chat gpt", 3.1, 3.5, "b", kind="client", status="error", status_message="the model is down")]
    chart = waterfall(spans)
    lost, retry, failed = chart.bars
    assert (lost.color, retry.color, failed.color) == (LOST_COLOR, COLORS["job"], ERROR_COLOR)
    assert lost.seconds is None and lost.x + lost.width == retry.x + retry.width  # drawn up to the trace's end
    svg = str(chart.svg())
    assert "never ended" in svg and 'stroke-dasharray="3 2"' in svg
    assert "w1@host (pid 11)" in svg  # two workers: each bar says which
    assert "status: error (the model is down)" in svg
    legend = [t.text for g in parse(svg).iter(f"{SVG}g") if g.get("class") == "legend" for t in g.iter(f"{SVG}text")]
    assert legend == ["job", "chat", "failed", "never ended"]


def test_one_worker_is_not_repeated_on_every_bar() -> None:
    spans = [span("a", "invoke_agent r", 0, 1, worker="w1", worker_pid=1),
             span("b", "chat m", 0, 1, "a", worker="w1", worker_pid=1)]
    svg = str(waterfall(spans).svg())
    texts = [t.text or "" for t in parse(svg).iter(f"{SVG}text")]
    assert not any("w1" in text for text in texts)  # in the tooltips only
    assert "w1 (pid 1)" in svg


def test_every_label_is_escaped() -> None:
    hostile = '<script>alert("x")</script>&"\''
    spans = [span("a", f"invoke_agent {hostile}", 0, 1, worker=hostile, worker_pid=3, status="error",
                  status_message=hostile),
             span("b", f"execute_tool {hostile}", 0, 1, "a", worker="w2", worker_pid=4)]
    spans[1].attributes = {"gen_ai.operation.name": f'x" onload="{hostile}'}
    chart = waterfall(spans, link=lambda s: f'/admin/step?name={hostile}')
    svg = str(chart.svg(title=hostile))
    assert "<script>" not in svg and 'onload="' not in svg and 'alert("x")' not in svg
    root = parse(svg)
    assert root.get("aria-label") == hostile
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert f"invoke_agent {hostile}" in texts and f"execute_tool {hostile}" in texts
    links = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert links == [f"/admin/step?name={hostile}"] * 2
    assert not [element for element in root.iter() if element.tag == f"{SVG}script"]


def test_a_span_whose_parent_is_elsewhere_is_a_root_and_an_empty_trace_draws_nothing() -> None:
    chart = waterfall([span("b", "chat m", 0, 1, "z")])
    assert [(bar.depth, bar.leaf) for bar in chart.bars] == [(0, True)]
    empty = waterfall([])
    assert empty.is_empty and empty.bars == []
    assert re.search(r'viewBox="0 0 1000 \d+"', str(empty.svg()))


def test_durations_read_as_people_say_them() -> None:
    assert [duration_text(s) for s in (0.0004, 0.123, 1.234, 123.0)] == ["0.4 ms", "123 ms", "1.23 s", "2 min 03 s"]


def test_a_wide_turn_is_drawn_quickly() -> None:
    """A 1 -> 8 -> 1 turn over two workers: ten jobs with a run, two model calls and a tool call each."""
    spans = []
    for job in range(10):
        base = 0.0 if job == 0 else 1.0 if job < 9 else 5.0
        j, a = f"j{job}", f"a{job}"
        spans += [span(j, f"job task_{job}", base, base + 3, "j0" if job > 0 else "", kind="consumer",
                       worker=f"w{job % 2}", worker_pid=job),
                  span(a, f"invoke_agent bot_{job}", base + 0.1, base + 2.9, j),
                  span(f"c{job}", "chat m", base + 0.1, base + 1, a, kind="client", input_tokens=100,
                       output_tokens=10, cost=Decimal("0.001") * job),
                  span(f"t{job}", "execute_tool look", base + 1, base + 2, a),
                  span(f"d{job}", "chat m", base + 2, base + 2.9, a, kind="client", input_tokens=150,
                       output_tokens=20, cost=Decimal("0.002"))]
    started = time.perf_counter()
    svg = str(waterfall(spans).svg())
    elapsed = time.perf_counter() - started
    assert len(parse(svg).findall(f".//{SVG}rect")) >= 50
    print(f"waterfall of a 1 -> 8 -> 1 turn (50 spans): {elapsed * 1000:.1f} ms")
    assert elapsed < 0.2


def test_figures_stay_inside_the_chart() -> None:
    """After the bar when they fit, else before it, else inside the bar in white."""
    spans = [span("a", "job long", 0, 10, kind="consumer", worker="celery@a-rather-long-worker-name", worker_pid=1),
             span("b", "chat m", 0, 1, "a", kind="client", worker="celery@b", worker_pid=2, input_tokens=10),
             span("c", "chat m", 9, 10, "a", kind="client", worker="celery@b", worker_pid=2, input_tokens=10)]
    root = parse(str(waterfall(spans).svg()))
    placed = {g.get("data-span-id", "")[:1]: g.findall(f"{SVG}text")[1] for g in root.iter(f"{SVG}g")
              if "span" in g.get("class", "").split()}
    assert placed["b"].get("text-anchor") is None and float(placed["b"].get("x", 0)) < 500  # after its bar
    assert placed["c"].get("text-anchor") == "end"  # at the right edge: before its bar
    assert placed["a"].get("fill") == "#ffffff" and float(placed["a"].get("x", 0)) == 304.0  # the full width: inside


def test_with_two_workers_a_bar_names_its_worker_when_it_is_not_its_parents() -> None:
    spans = [span("a", "job one", 0, 2, kind="consumer", worker="w1", worker_pid=1),
             span("b", "invoke_agent r", 0, 1, "a", worker="w1", worker_pid=1),
             span("c", "job two", 1, 2, "a", kind="consumer", worker="w2", worker_pid=2),
             span("d", "chat m", 1, 2, "c", kind="client", worker="w2", worker_pid=2)]
    root = parse(str(waterfall(spans).svg()))
    figures = {g.get("data-span-id", "")[:1]: g.findall(f"{SVG}text")[1].text or "" for g in root.iter(f"{SVG}g")
               if "span" in g.get("class", "").split()}
    assert ["w1 (pid 1)" in figures["a"], "w1" in figures["b"], "w2 (pid 2)" in figures["c"], "w2" in figures["d"]] \
        == [True, False, True, False]
