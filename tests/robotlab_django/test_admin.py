"""The admin: lists, filters, totals, transcript, actions, usage chart, read-only results, escaping."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, Status, Thread

pytestmark = pytest.mark.django_db

PAYLOAD = "<script>alert('xss')</script>"
ESCAPED = "&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt;"


def _hostile_thread() -> RobotResult:
    """A run whose every piece of model and user text is a script payload."""
    from robotlab_django.registry import registry

    def hostile(**options: Any) -> Any:
        import robotlab

        def lookup(query: str) -> str:
            """Look things up."""
            return PAYLOAD

        return robotlab.build(name="calculator", local_tools=[lookup], **options)

    registry.register(hostile, name="calculator", replace=True)
    try:
        llm = FakeLLM([tool_call("lookup", query=PAYLOAD), text(PAYLOAD, usage=(100, 20), cost=0.0042)])
        row = services.run_robot(f"s-{PAYLOAD}", "calculator", PAYLOAD, llm=llm)
    finally:
        from tests.robotlab_django.robotapp.robots.echo_robot import build_calculator

        registry.register(build_calculator, name="calculator", description="Adds numbers", replace=True)
    RobotResult.objects.filter(pk=row.pk).update(model=PAYLOAD, error=PAYLOAD)
    Thread.objects.filter(pk=row.thread_id).update(state_data={"note": PAYLOAD})
    return RobotResult.objects.get(pk=row.pk)


def _pages(row: RobotResult) -> list[str]:
    thread = row.thread_id
    return [
        "/admin/robotlab/thread/", f"/admin/robotlab/thread/?q={PAYLOAD}", f"/admin/robotlab/thread/{thread}/change/",
        f"/admin/robotlab/thread/{thread}/transcript/", "/admin/robotlab/robotresult/",
        f"/admin/robotlab/robotresult/?q={PAYLOAD}", f"/admin/robotlab/robotresult/{row.pk}/change/",
        "/admin/robotlab/robotresult/usage/", f"/admin/robotlab/robotresult/usage/?robot_name={PAYLOAD}",
    ]


def test_model_and_user_text_is_escaped_on_every_page(admin_client: Client) -> None:
    row = _hostile_thread()
    for url in _pages(row):
        response = admin_client.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert PAYLOAD not in body, url
        assert "<script>alert" not in body, url
    transcript = admin_client.get(f"/admin/robotlab/thread/{row.thread_id}/transcript/").content.decode()
    assert ESCAPED in transcript


def test_json_exports_cannot_be_read_as_html(admin_client: Client) -> None:
    row = _hostile_thread()
    response = admin_client.get(f"/admin/robotlab/thread/{row.thread_id}/transcript.json")
    assert response["Content-Type"] == "application/json; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="transcript-s--script-alert-xss')
    assert b"<" not in response.content
    data = json.loads(response.content)
    assert data["threads"][0]["results"][0]["reply"] == PAYLOAD


def _thread_with_runs() -> Thread:
    llm = FakeLLM([tool_call("add", id="c1", a=2, b=3, usage=(0, 0)), text("It is 5.", usage=(100, 20), cost=0.0042),
                   text("Bye.", usage=(50, 5), cost=0.001)])
    services.run_robot("t-1", "calculator", "What is 2+3?", llm=llm)
    services.run_robot("t-1", "calculator", "Thanks", llm=llm)
    return Thread.objects.get(session_id="t-1")


def test_thread_list_shows_runs_tokens_and_cost(admin_client: Client) -> None:
    _thread_with_runs()
    body = admin_client.get("/admin/robotlab/thread/").content.decode()
    assert "t-1" in body and "$0.005200" in body
    assert "<td class=\"field-run_count\">2</td>" in body
    assert "<td class=\"field-total_tokens\">" in body
    assert admin_client.get("/admin/robotlab/thread/?o=6").status_code == 200  # sorted by tokens


def test_thread_page_has_results_inline_and_transcript_links(admin_client: Client) -> None:
    thread = _thread_with_runs()
    body = admin_client.get(f"/admin/robotlab/thread/{thread.pk}/change/").content.decode()
    assert "latest results" in body.lower() and "It is 5." in body and "Bye." in body
    assert f"/admin/robotlab/thread/{thread.pk}/transcript/" in body
    assert "2 runs, 150 input + 25 output tokens" in body


def test_transcript_shows_tool_calls_and_their_results_in_order(admin_client: Client) -> None:
    thread = _thread_with_runs()
    body = admin_client.get(f"/admin/robotlab/thread/{thread.pk}/transcript/").content.decode()
    positions = [body.index(fragment) for fragment in (
        "What is 2+3?", "Tool call", "&quot;a&quot;: 2", "Tool result", "It is 5.", "Thanks", "Bye.")]
    assert positions == sorted(positions)
    assert "<code>add</code>" in body


def test_result_list_filters_search_and_totals(admin_client: Client) -> None:
    _thread_with_runs()
    services.run_robot("t-2", "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    everything = admin_client.get("/admin/robotlab/robotresult/").content.decode()
    assert "Totals of these results: 3 runs, 160 input tokens, 26 output tokens, $0.505200." in everything
    queries = (("robot_name=echo", 1), ("robot_name=calculator", 2), (f"status={Status.COMPLETED}", 3),
               ("model=fake", 3), ("status=failed", 0), ("created_at__gte=2000-01-01T00:00:00%2B00:00", 3),
               ("q=Thanks", 1), ("q=t-2", 1))
    for query, runs in queries:
        body = admin_client.get(f"/admin/robotlab/robotresult/?{query}").content.decode()
        assert f"Totals of these results: {runs} runs" in body, query
    # tokens in and out share one column (issue 17: the list fits at 1,400 px)
    assert "$0.500000" in everything and '<td class="field-tokens_display">10 / 1</td>' in everything


def test_results_are_read_only(admin_client: Client) -> None:
    thread = _thread_with_runs()
    row = thread.results.first()
    assert admin_client.get("/admin/robotlab/robotresult/add/").status_code == 403
    assert admin_client.get(f"/admin/robotlab/robotresult/{row.pk}/delete/").status_code == 403
    assert admin_client.get("/admin/robotlab/thread/add/").status_code == 403
    page = admin_client.get(f"/admin/robotlab/robotresult/{row.pk}/change/").content.decode()
    assert 'name="_save"' not in page and "Tool call" in page
    assert 'name="_save"' not in admin_client.get(f"/admin/robotlab/thread/{thread.pk}/change/").content.decode()


def test_rerun_action_runs_the_last_user_message_again(admin_client: Client,
                                                       scripted_llm: Any) -> None:
    llm = scripted_llm(text("first"), text("again"))
    services.run_robot("t-1", "echo", "hello")
    thread = Thread.objects.get(session_id="t-1")
    empty = Thread.objects.create(session_id="empty")
    response = admin_client.post("/admin/robotlab/thread/", {
        "action": "rerun_last_user_message", "_selected_action": [thread.pk, empty.pk]}, follow=True)
    messages = [str(message) for message in response.context["messages"]]
    assert any("Re-ran the last user message of 1 thread(s)" in message for message in messages)
    assert any("empty has no user message" in message for message in messages)
    assert list(thread.results.values_list("input", "reply")) == [("hello", "first"), ("hello", "again")]
    assert len(llm.requests) == 2


def test_export_action_downloads_the_selected_transcripts(admin_client: Client) -> None:
    thread = _thread_with_runs()
    response = admin_client.post("/admin/robotlab/thread/", {
        "action": "export_transcript", "_selected_action": [thread.pk]})
    assert response["Content-Disposition"] == 'attachment; filename="transcript-t-1.json"'
    data = json.loads(response.content)["threads"][0]
    assert data["session_id"] == "t-1" and data["totals"] == {
        "runs": 2, "input_tokens": 150, "output_tokens": 25, "cost": "0.00520000"}
    first = data["results"][0]
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert first["tool_calls_data"][0]["tool"]["name"] == "add"


def test_usage_page_charts_tokens_and_cost_per_day(admin_client: Client) -> None:
    _thread_with_runs()
    services.run_robot("t-2", "echo", "hi", llm=FakeLLM([text("hello", usage=(10, 1), cost=0.5)]))
    body = admin_client.get("/admin/robotlab/robotresult/usage/?days=7").content.decode()
    assert body.count('<svg class="robotlab-chart"') == 2
    assert "calculator · fake" in body and "echo · fake" in body
    assert "<rect" in body and "Tokens per day" in body and "Cost per day (USD)" in body
    assert "<strong>7 days</strong>" in body
    only = admin_client.get("/admin/robotlab/robotresult/usage/?robot_name=echo&days=bad").content.decode()
    assert "calculator · fake" not in only and "<strong>30 days</strong>" in only


def test_staff_without_permissions_cannot_see_transcripts_or_usage(django_user_model: Any) -> None:
    thread = _thread_with_runs()
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(f"/admin/robotlab/thread/{thread.pk}/transcript/").status_code == 403
    assert client.get("/admin/robotlab/robotresult/usage/").status_code == 403
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_thread", "view_robotresult"]))
    assert client.get(f"/admin/robotlab/thread/{thread.pk}/transcript/").status_code == 200
    assert client.get("/admin/robotlab/robotresult/usage/").status_code == 200
    actions = client.get("/admin/robotlab/thread/").content.decode()
    assert "export_transcript" in actions and "rerun_last_user_message" not in actions
    staff.user_permissions.add(Permission.objects.get(codename="change_thread"))
    assert "rerun_last_user_message" in client.get("/admin/robotlab/thread/").content.decode()


def _bulk_results(count: int, start: int = 0) -> None:
    threads = Thread.objects.bulk_create([Thread(session_id=f"bulk-{index}") for index in range(start, start + count)])
    RobotResult.objects.bulk_create([
        RobotResult(thread=thread, sequence_number=1, robot_name="echo", status=Status.COMPLETED, model="fake",
                    input_tokens=10, output_tokens=2, cost=Decimal("0.001")) for thread in threads])


@pytest.mark.parametrize("url", ["/admin/robotlab/robotresult/", "/admin/robotlab/thread/"])
def test_change_list_queries_do_not_grow_with_the_page(admin_client: Client, django_assert_max_num_queries: Any,
                                                       url: str) -> None:
    _bulk_results(10)
    admin_client.get(url)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as small:
        admin_client.get(url)
    _bulk_results(90, start=10)
    with CaptureQueriesContext(connection) as large:
        assert admin_client.get(url).status_code == 200
    assert len(large) == len(small)


def test_result_page_shows_its_checkpointed_steps_read_only_and_escaped(admin_client: Client) -> None:
    from django.urls import reverse

    from robotlab_django.models import RunStep

    row = _hostile_thread()
    RunStep.objects.create(result=row, idx=0, kind="llm", fingerprint="a" * 64,
                           output={"content": None, "tool_calls": [{"id": "c1", "name": "lookup", "arguments": "{}"}]})
    RunStep.objects.create(result=row, idx=1, kind="tool", fingerprint="b" * 64, output={"json": json.dumps(PAYLOAD)})
    page = admin_client.get(reverse("admin:robotlab_robotresult_change", args=[row.pk])).content.decode()
    assert "checkpointed LLM and tool calls" in page and "lookup({})" in page and "b" * 64 in page
    assert PAYLOAD not in page and ESCAPED in page
    assert 'name="steps-0-kind"' not in page  # read-only: no form fields


def test_view_only_staff_cannot_cancel_runs(django_user_model: Any) -> None:
    """Cancelling needs the result model's *change* permission: viewing someone's run is not steering it."""
    thread = Thread.objects.create(session_id="victim")
    row = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="echo", status=Status.QUEUED,
                                     input="hello")
    staff = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_thread", "view_robotresult"]))
    client = Client()
    client.force_login(staff)
    assert "cancel_runs" not in client.get("/admin/robotlab/robotresult/").content.decode()
    client.post("/admin/robotlab/robotresult/", {"action": "cancel_runs", "_selected_action": [row.pk]})
    assert RobotResult.objects.get(pk=row.pk).status == Status.QUEUED
    staff.user_permissions.add(Permission.objects.get(codename="change_robotresult"))
    assert "cancel_runs" in client.get("/admin/robotlab/robotresult/").content.decode()
    response = client.post("/admin/robotlab/robotresult/", {"action": "cancel_runs", "_selected_action": [row.pk]},
                           follow=True)
    assert any("Cancelled 1 run(s)" in str(message) for message in response.context["messages"])
    assert RobotResult.objects.get(pk=row.pk).status == Status.CANCELLED
