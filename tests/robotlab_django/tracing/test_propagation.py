"""The trace context through Celery jobs: a job continues the trace that queued it; a later job links the earlier.

Celery runs the tasks in process here (its eager mode: a real task request, with the message's headers);
tests/robotlab_django/test_network_workers.py checks the same across two real worker processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from celery import current_app
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from robotlab.testing import text
from robotlab_django import services, tasks
from robotlab_django.models import RunSpan, Status
from robotlab_django.runs import executor
from robotlab_django.tracing import propagation
from robotlab_django.tracing.processor import RunSpanProcessor
from robotlab_django.tracing.propagation import headers, job, request_headers
from tests.robotlab.spans import Recorder, parent_of, span_id

pytestmark = pytest.mark.django_db


def _one(spans: Recorder, name: str) -> ReadableSpan:
    """The one span called ``name``, of any scope (the app's job spans are ``robotlab_django``'s)."""
    [found] = [s for s in spans.all_spans() if s.name == name]
    return found


@pytest.fixture
def eager() -> Iterator[None]:
    """Celery runs sent tasks in process (its own test mode), so the celery executor needs no broker here."""
    saved = current_app.conf.task_always_eager, current_app.conf.task_eager_propagates
    current_app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        yield
    finally:
        current_app.conf.update(task_always_eager=saved[0], task_eager_propagates=saved[1])


def test_the_headers_carry_the_current_span(spans: Recorder) -> None:
    assert headers() == {}  # no trace: nothing to carry
    with trace.get_tracer("test").start_as_current_span("request") as span:
        carried = headers()
    context = span.get_span_context()
    assert carried["traceparent"].startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")  # and its flags


def test_the_request_headers_are_read_from_the_message_or_the_request() -> None:
    class Request:
        headers = {"traceparent": "00-a-b-01", "other": 3}
        tracestate = "k=v"

    assert request_headers(Request()) == {"traceparent": "00-a-b-01", "tracestate": "k=v"}
    assert request_headers(object()) == {}


def test_a_job_continues_the_trace_that_queued_it(kept: RunSpanProcessor, spans: Recorder, scripted_llm: Any,
                                                  settings: Any, eager: None,
                                                  django_capture_on_commit_callbacks: Any) -> None:
    scripted_llm(text("via celery"))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery"}
    with (django_capture_on_commit_callbacks(execute=True) as callbacks,
          trace.get_tracer("test").start_as_current_span("websocket receive") as request):
        row = services.start_run("s1", "echo", "Hi")
        executor.dispatch(row)
    assert len(callbacks) == 1  # sent after the commit, outside the span: the context was taken as it was queued
    row.refresh_from_db()
    assert row.status == Status.COMPLETED

    job, agent = _one(spans, "job echo"), spans.one("invoke_agent echo")
    assert job.kind is SpanKind.CONSUMER
    assert job.instrumentation_scope is not None and job.instrumentation_scope.name == "robotlab_django"
    assert parent_of(job) == request.get_span_context().span_id
    assert parent_of(agent) == span_id(job)
    assert {s.context.trace_id for s in (job, agent) if s.context} == {request.get_span_context().trace_id}
    assert job.attributes is not None and job.attributes["messaging.message.id"] == row.task_id
    assert job.attributes["robotlab.run.id"] == row.run_id and job.links == ()

    kept.force_flush()
    stored = {s.name: s for s in RunSpan.objects.filter(result=row)}
    assert stored["job echo"].kind == "consumer" and stored["job echo"].ended_at is not None
    assert stored["invoke_agent echo"].parent_span_id == stored["job echo"].span_id
    assert stored["job echo"].worker == row.worker and stored["job echo"].worker_pid == row.worker_pid


def test_a_job_is_stored_as_it_starts(kept: RunSpanProcessor) -> None:
    """A job's span is in the table before it ends: a worker killed mid-job leaves it there without an end."""

    class Request:
        id, retries, delivery_info = "task-1", 0, {"routing_key": "robots"}

    row = services.start_run("s1", "echo", "Hi")
    with job(Request(), row.pk):
        started = RunSpan.objects.get(result=row)
        assert (started.name, started.kind, started.ended_at) == ("job echo", "consumer", None)
        assert started.attributes["messaging.destination.name"] == "robots"
    kept.force_flush()
    ended = RunSpan.objects.get(result=row)  # the same row, ended
    assert ended.pk == started.pk and ended.ended_at is not None and ended.started_at == started.started_at


def test_a_later_job_of_the_same_row_links_to_the_earlier_one(kept: RunSpanProcessor, spans: Recorder,
                                                               scripted_llm: Any, eager: None) -> None:
    scripted_llm(text("once"))
    row = services.start_run("s1", "echo", "Hi")
    tasks.run_robot.apply(args=(row.pk,))
    kept.force_flush()
    first = RunSpan.objects.get(result=row, name="job echo")
    again = tasks.run_robot.apply(args=(row.pk,), retries=1).get()  # a retry (here: a duplicate, skipped)
    assert again["skipped"] is True
    kept.force_flush()
    second = RunSpan.objects.filter(result=row, name="job echo").exclude(pk=first.pk).get()
    assert second.links == [{"trace_id": first.trace_id, "span_id": first.span_id, "relation": "earlier attempt"}]
    assert second.attributes["robotlab.job.retries"] == 1
    [link] = spans.all_spans()[-1].links
    assert link.attributes == {"robotlab.link": "earlier attempt"}


def test_no_job_span_without_instrumentation(kept: RunSpanProcessor, spans: Recorder, settings: Any,
                                             scripted_llm: Any, eager: None) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "INSTRUMENT": False}
    scripted_llm(text("quiet"))
    row = services.start_run("s1", "echo", "Hi")
    tasks.run_robot.apply(args=(row.pk,))
    kept.force_flush()
    assert spans.all_spans() == [] and not RunSpan.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_run_in_a_background_thread_continues_the_trace_that_queued_it(spans: Recorder, settings: Any,
                                                                          scripted_llm: Any) -> None:
    scripted_llm(text("from the background"))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread"}
    with trace.get_tracer("test").start_as_current_span("websocket receive") as request:
        row = services.start_run("s1", "echo", "hi")
        executor.dispatch(row)  # no transaction: the thread starts now, in this context
    assert executor.join(timeout=10)
    row.refresh_from_db()
    assert row.status == Status.COMPLETED
    agent = spans.one("invoke_agent echo")
    assert parent_of(agent) == request.get_span_context().span_id


def test_a_job_whose_span_cannot_start_runs_without_it(kept: RunSpanProcessor, scripted_llm: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def broken() -> None:
        raise RuntimeError("no tracing today")

    monkeypatch.setattr(propagation, "keeping", broken)
    scripted_llm(text("still runs"))
    row = services.start_run("s1", "echo", "Hi")
    assert tasks.run_robot(row.pk)["status"] == "completed"
