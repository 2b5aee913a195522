"""A run's trace in the admin: the waterfall on a run's and a network turn's page, linked to the transcript."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from robotlab.testing import text as reply
from robotlab.testing import tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, RunSpan, Status
from robotlab_django.runs.transcript import run_items
from robotlab_django.tracing.processor import RunSpanProcessor
from tests.robotlab_django.admin.trace_turn import make_turn

pytestmark = pytest.mark.django_db

SVG = "{http://www.w3.org/2000/svg}"
SCRIPT = "<script>alert(1)</script>"
IMAGE = "<img src=x onerror=alert(1)>"


def _page(client: Client, row: Any) -> str:
    response = client.get(reverse("admin:robotlab_robotresult_change", args=[row.pk]))
    assert response.status_code == 200
    return str(response.content.decode())


def _svg(page: str) -> ET.Element:
    found = re.search(r'<svg class="robotlab-waterfall".*?</svg>', page, re.DOTALL)
    assert found is not None, "no waterfall on the page"
    return ET.fromstring(found.group(0))  # well-formed, or this raises


def _bars(svg: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-span-id", ""): g for g in svg.iter(f"{SVG}g") if "span" in g.get("class", "").split()}


def _href(bar: ET.Element) -> str | None:
    link = bar.find(f"{SVG}a")
    return None if link is None else link.get("href")


def test_a_turns_page_draws_every_span_of_its_tasks_linked_to_their_transcript_lines(admin_client: Client) -> None:
    turn = make_turn(8)
    page = _page(admin_client, turn.row)
    bars = _bars(_svg(page))
    assert len(bars) == RunSpan.objects.count() == 1 + 2 * 10 + 8 * 3 + 2  # the jobs, robots and calls of 10 tasks
    names = [t.text for t in _svg(page).iter(f"{SVG}text") if t.text and t.text.startswith(("job", "invoke"))]
    assert names[:3] == ["job report", "job plan", "invoke_agent planner"]  # nested in tree order

    branch = turn.tasks["branch_2"]
    url = reverse("admin:robotlab_robotresult_change", args=[branch.pk])
    # its model calls: the 1st to the tool call it asked for (line 2), the 2nd to the reply (line 4)
    assert _href(bars[turn.spans[("branch_2", "chat 1")].span_id]) == f"{url}#robotlab-step-{branch.pk}-2"
    assert _href(bars[turn.spans[("branch_2", "tool")].span_id]) == f"{url}#robotlab-step-{branch.pk}-2"
    assert _href(bars[turn.spans[("branch_2", "chat 2")].span_id]) == f"{url}#robotlab-step-{branch.pk}-4"
    assert _href(bars[turn.spans[("branch_2", "agent")].span_id]) == f"{url}#robotlab-step-{branch.pk}-1"
    assert _href(bars[turn.spans[("branch_2", "job")].span_id]) == url  # the task's page
    assert _href(bars[turn.spans[("report", "job")].span_id]) is None  # this page

    # ... and the task's page has those lines, and draws its own spans
    task_page = _page(admin_client, branch)
    assert f'id="robotlab-step-{branch.pk}-2"' in task_page and f'id="robotlab-step-{branch.pk}-4"' in task_page
    own = _bars(_svg(task_page))
    assert len(own) == 5
    assert _href(own[turn.spans[("branch_2", "chat 2")].span_id]) == f"#robotlab-step-{branch.pk}-4"
    turn_url = reverse("admin:robotlab_robotresult_change", args=[turn.row.pk])
    assert f'href="{turn_url}#robotlab-trace"' in task_page  # up to the whole turn's trace


def test_the_slowest_and_most_expensive_spans_are_marked_and_named(admin_client: Client) -> None:
    turn = make_turn(8)
    page = _page(admin_client, turn.row)
    bars = _bars(_svg(page))
    slowest = [span_id for span_id, bar in bars.items() if "slowest" in (bar.get("class") or "").split()]
    costliest = [span_id for span_id, bar in bars.items() if "costliest" in (bar.get("class") or "").split()]
    assert slowest == [turn.spans[("branch_3", "tool")].span_id]
    assert costliest == [turn.spans[("reduce", "chat 1")].span_id]
    assert "slowest: execute_tool search (3.20 s" in page
    assert "most expensive: chat gpt-4o-mini (1.10 s · 1,500 tokens · $0.0062" in page
    assert "47 spans, 6.74 s" in page and "ran on celery@worker-a (pid 4101), celery@worker-b (pid 4102)" in page
    worker_bar = bars[turn.spans[("branch_1", "job")].span_id]
    assert any("celery@worker-b (pid 4102)" in (t.text or "") for t in worker_bar.iter(f"{SVG}text"))
    colours = {bar.find(f".//{SVG}rect").get("fill") for bar in bars.values()}  # type: ignore[union-attr]
    assert len(colours) == 4  # job, robot run, model call, tool call


def test_the_page_reads_a_bounded_number_of_queries_whatever_the_turns_size(admin_client: Client,
                                                                         django_assert_max_num_queries: Any) -> None:
    small, large = make_turn(2, session="small"), make_turn(8, session="large")
    _page(admin_client, small.row)  # warm (sessions, content types)
    with CaptureQueriesContext(connection) as few:
        _page(admin_client, small.row)
    with django_assert_max_num_queries(len(few)), CaptureQueriesContext(connection) as many:
        _page(admin_client, large.row)
    assert len(many) == len(few)
    spans = [query["sql"] for query in many.captured_queries if "robotlab_runspan" in query["sql"]]
    assert len(spans) == 1  # one read of the spans (no span links here)


def test_hostile_robot_and_tool_names_are_shown_as_text(admin_client: Client) -> None:
    turn = make_turn(2, robot=SCRIPT, tool=IMAGE)
    for row in (turn.row, turn.tasks["branch_1"]):
        page = _page(admin_client, row)
        assert SCRIPT not in page and IMAGE not in page and "<img src=x" not in page
        svg = _svg(page)
        texts = [t.text or "" for t in svg.iter(f"{SVG}text")]
        assert f"invoke_agent {SCRIPT}" in texts and f"execute_tool {IMAGE}" in texts  # the text, as given
        assert not [element for element in svg.iter() if element.tag in (f"{SVG}script", f"{SVG}img", "script")]
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_a_thread_page_links_each_runs_trace(admin_client: Client) -> None:
    turn = make_turn(2)
    thread = turn.row.thread
    RobotResult.objects.create(thread=thread, sequence_number=99, robot_name="report", status=Status.COMPLETED)
    page = admin_client.get(reverse("admin:robotlab_thread_change", args=[thread.pk])).content.decode()
    for row in (turn.row, turn.tasks["branch_1"]):
        url = reverse("admin:robotlab_robotresult_change", args=[row.pk])
        count = RunSpan.objects.filter(result=row).count()
        assert f'<a href="{url}#robotlab-trace" class="robotlab-trace-link">{count} span' in page
    cells = re.findall(r'<td class="field-trace_link">\s*<p>(.*?)</p>', page)
    assert len(cells) == 6 and cells[0] == "-"  # the newest run has no spans
    transcript = admin_client.get(reverse("admin:robotlab_thread_transcript", args=[thread.pk])).content.decode()
    assert f'{reverse("admin:robotlab_robotresult_change", args=[turn.row.pk])}#robotlab-trace' in transcript


def test_a_run_without_spans_says_so(admin_client: Client) -> None:
    turn = make_turn(2)
    RunSpan.objects.all().delete()
    page = _page(admin_client, turn.row)
    assert 'id="robotlab-trace"' in page and "No spans kept for this run" in page
    assert "robotlab-waterfall" not in page.split('id="robotlab-trace"')[1].split("</div>")[0]


def test_spans_linked_to_another_runs_spans_link_to_that_run(admin_client: Client) -> None:
    earlier, later = make_turn(2, session="earlier"), make_turn(2, session="later")
    target = earlier.spans[("report", "job")]
    RunSpan.objects.filter(pk=later.spans[("report", "job")].pk).update(
        links=[{"trace_id": target.trace_id, "span_id": target.span_id, "relation": "re-run of"},
               {"trace_id": "f" * 32, "span_id": "e" * 16}])
    page = _page(admin_client, later.row)
    url = reverse("admin:robotlab_robotresult_change", args=[earlier.row.pk])
    assert f'<code>job report</code> &rarr; re-run of: <a href="{url}">job report of run {earlier.row.pk}</a>' in page
    assert f"linked: span {'e' * 16} of trace {'f' * 32} (not kept)" in page


def test_a_real_tool_round_links_each_bar_to_its_line(admin_client: Client, kept: RunSpanProcessor,
                                                      scripted_llm: Any) -> None:
    scripted_llm(tool_call("add", id="call_1", a=1, b=2, usage=(10, 5), cost=0.0015),
                 reply("3", usage=(20, 7), cost=0.0025))
    row = services.run_robot("s-1", "calculator", "1 + 2?")
    kept.force_flush()
    spans = {span.span_id: span for span in RunSpan.objects.filter(result=row)}
    bars = _bars(_svg(_page(admin_client, row)))
    assert set(bars) == set(spans)
    links = sorted((spans[span_id].name, spans[span_id].started_at, _href(bar)) for span_id, bar in bars.items())
    anchor = f"#robotlab-step-{row.pk}-"
    assert [(name, href) for name, _start, href in links] == [
        ("chat", anchor + "2"), ("chat", anchor + "4"), ("execute_tool add", anchor + "2"),
        ("invoke_agent calculator", anchor + "1")]


def test_a_turn_run_in_one_process_links_its_robots_calls_to_their_rows(admin_client: Client, kept: RunSpanProcessor,
                                                                         scripted_llm: Any) -> None:
    scripted_llm(reply("billing"), reply("Your invoice is attached."))
    row = services.run_robot("s-1", "helpdesk", "Where is my invoice?")
    kept.force_flush()
    spans = {span.span_id: span for span in RunSpan.objects.filter(result=row)}  # all on the turn's row
    bars = _bars(_svg(_page(admin_client, row)))
    assert set(bars) == set(spans)
    tasks = {task.robot_name: task for task in row.task_rows.all()}
    links = {spans[span_id].name + (" under " + spans[spans[span_id].parent_span_id].name
                                    if spans[span_id].name == "chat" else ""): _href(bar)
             for span_id, bar in bars.items()}
    for robot in ("classifier", "billing_agent"):
        task = tasks[robot]
        url = reverse("admin:robotlab_robotresult_change", args=[task.pk])
        first_reply = next(n for n, item in enumerate(run_items(task), 1) if item.kind == "assistant")
        assert links[f"invoke_agent {robot}"] == f"{url}#robotlab-step-{task.pk}-1"
        assert links[f"chat under invoke_agent {robot}"] == f"{url}#robotlab-step-{task.pk}-{first_reply}"
    assert links["invoke_workflow helpdesk"] is None
