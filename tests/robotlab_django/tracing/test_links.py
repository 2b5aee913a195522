"""Runs in the traces of what started them: a re-run linked to the run it repeats, a socket's runs in its trace."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from django.urls import reverse
from opentelemetry import trace

from robotlab.testing import text
from robotlab_django import services
from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.models import RobotResult, RunSpan, Thread
from robotlab_django.tracing.links import RERUN_OF, from_request
from robotlab_django.tracing.processor import RunSpanProcessor

TRACE_ID, SPAN_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"


@pytest.mark.django_db
def test_a_rerun_is_linked_to_the_run_it_repeats(kept: RunSpanProcessor, scripted_llm: Any,
                                                 admin_client: Client) -> None:
    scripted_llm(text("first"), text("again"))
    first = services.run_robot("t-1", "echo", "hello")
    kept.force_flush()
    earlier = RunSpan.objects.filter(result=first).order_by("started_at").first()
    assert earlier is not None and earlier.name == "invoke_agent echo"

    again = services.rerun_last_user_message(Thread.objects.get(session_id="t-1"))
    kept.force_flush()
    rerun = RunSpan.objects.get(result=again, name="rerun echo")
    assert rerun.links == [{"trace_id": earlier.trace_id, "span_id": earlier.span_id, "relation": RERUN_OF}]
    assert rerun.attributes["robotlab.rerun.of"] == first.run_id and rerun.parent_span_id == ""
    agent = RunSpan.objects.get(result=again, name="invoke_agent echo")
    assert (agent.trace_id, agent.parent_span_id) == (rerun.trace_id, rerun.span_id)  # the run under it
    assert agent.trace_id != earlier.trace_id  # a trace of its own, linked

    page = admin_client.get(reverse("admin:robotlab_robotresult_change", args=[again.pk])).content.decode()
    url = reverse("admin:robotlab_robotresult_change", args=[first.pk])
    assert f'<code>rerun echo</code> &rarr; re-run of: <a href="{url}">invoke_agent echo of run {first.pk}</a>' in page


@pytest.mark.django_db
def test_a_rerun_without_kept_spans_has_no_span_of_its_own(kept: RunSpanProcessor, settings: Any,
                                                           scripted_llm: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "TRACES": False}
    scripted_llm(text("first"), text("again"))
    services.run_robot("t-1", "echo", "hello")
    again = services.rerun_last_user_message(Thread.objects.get(session_id="t-1"))
    assert RobotResult.objects.get(pk=again.pk).reply == "again"
    kept.force_flush()
    assert not RunSpan.objects.exists()


def test_a_request_without_a_trace_or_already_traced_changes_nothing(kept: RunSpanProcessor) -> None:
    with from_request([(b"host", b"testserver")]):
        assert not trace.get_current_span().get_span_context().is_valid
    with from_request([(b"traceparent", TRACEPARENT.encode())]):
        context = trace.get_current_span().get_span_context()
        assert (format(context.trace_id, "032x"), format(context.span_id, "016x")) == (TRACE_ID, SPAN_ID)
    assert not trace.get_current_span().get_span_context().is_valid  # left as it was
    with trace.get_tracer("test").start_as_current_span("request") as span, \
            from_request([(b"traceparent", TRACEPARENT.encode())]):
        assert trace.get_current_span() is span  # the project's own instrumentation wins


@pytest.mark.django_db(transaction=True)
async def test_the_websocket_request_that_queued_a_run_is_the_parent_of_its_spans(
        kept: RunSpanProcessor, scripted_llm: Any) -> None:
    scripted_llm(text("traced"))

    def owner() -> tuple[Any, str]:
        user = get_user_model().objects.create_user("ada", password="pw")
        client = Client()
        client.force_login(user)
        return services.get_thread(None, user=user), client.cookies["sessionid"].value

    thread, session = await sync_to_async(owner)()
    socket = WebsocketCommunicator(get_robotlab_asgi_application(), f"/ws/robotlab/threads/{thread.pk}/", headers=[
        (b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", f"sessionid={session}".encode()),
        (b"traceparent", TRACEPARENT.encode())])
    assert (await socket.connect())[0] is True
    await socket.send_json_to({"type": "message", "text": "hi"})
    frame: dict[str, Any] = {}
    while frame.get("type") != "queued":
        frame = await socket.receive_json_from(timeout=10)
    await socket.disconnect()

    def stored() -> RunSpan:
        kept.force_flush()
        row = RobotResult.objects.get(pk=frame["result_id"])
        return RunSpan.objects.get(result=row, name=f"invoke_agent {row.robot_name}")

    agent = await sync_to_async(stored)()
    await sync_to_async(connections.close_all)()  # asgiref's thread's, as the end of a request would
    assert (agent.trace_id, agent.parent_span_id) == (TRACE_ID, SPAN_ID)
