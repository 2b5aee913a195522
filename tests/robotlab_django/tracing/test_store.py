"""The spans of the app's runs kept in the span table (ROBOTLAB["TRACES"]): one row per span, written in batches."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections, transaction
from django.utils import timezone

import robotlab
from robotlab.config import get_config
from robotlab.errors import InferenceError
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, RunSpan, Status, Thread
from robotlab_django.privacy.erasure import erase_user
from robotlab_django.privacy.retention import prune_threads
from robotlab_django.tracing.exporter import store
from robotlab_django.tracing.processor import RunSpanProcessor
from tests.robotlab.spans import Recorder

pytestmark = pytest.mark.django_db


def _tree(result: Any) -> dict[str, RunSpan]:
    return {span.name: span for span in RunSpan.objects.filter(result=result)}


def test_a_tool_round_is_kept_on_its_row_once_the_batch_is_written(
        kept: RunSpanProcessor, spans: Recorder, scripted_llm: Any) -> None:
    scripted_llm(tool_call("add", id="call_1", a=1, b=2, usage=(10, 5), cost=0.0015), text("3", usage=(20, 7),
                                                                                             cost=0.0025))
    row = services.run_robot("s-1", "calculator", "1 + 2?")
    assert row.status == Status.COMPLETED

    assert not RunSpan.objects.exists()  # the run did not wait for its spans to be written
    kept.force_flush()
    stored = _tree(row)
    assert sorted(stored) == ["chat", "execute_tool add", "invoke_agent calculator"]
    assert RunSpan.objects.filter(result=row, name="chat").count() == 2
    agent, tool = stored["invoke_agent calculator"], stored["execute_tool add"]
    chats = list(RunSpan.objects.filter(result=row, name="chat").order_by("started_at"))
    assert agent.parent_span_id == "" and {s.parent_span_id for s in (*chats, tool)} == {agent.span_id}
    assert {s.trace_id for s in (agent, tool, *chats)} == {agent.trace_id} and len(agent.trace_id) == 32

    # the same spans as the SDK's (the in-memory exporter beside the table)
    assert {(format(s.context.trace_id, "032x"), format(s.context.span_id, "016x")) for s in spans.spans()
            if s.context} == set(RunSpan.objects.values_list("trace_id", "span_id"))

    assert (agent.kind, chats[0].kind, tool.kind) == ("internal", "client", "internal")
    assert agent.status == tool.status == "unset" and agent.ended_at is not None
    assert agent.started_at <= chats[0].started_at <= chats[0].ended_at <= tool.started_at  # type: ignore[operator]
    assert (chats[0].input_tokens, chats[0].output_tokens, chats[0].cost) == (10, 5, Decimal("0.0015"))
    assert (agent.input_tokens, agent.output_tokens, agent.cost) == (30, 12, Decimal("0.004"))
    assert agent.cost == row.cost and (agent.input_tokens, agent.output_tokens) == (row.input_tokens,
                                                                                    row.output_tokens)
    assert tool.attributes["gen_ai.tool.name"] == "add" and tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert chats[0].attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert agent.attributes["robotlab.run.id"] == row.run_id
    assert "gen_ai.input.messages" not in chats[0].attributes  # contents only when asked
    assert {(s.worker, s.worker_pid) for s in (agent, tool, *chats)} == {(row.worker, row.worker_pid)}
    assert agent.duration is not None and 0 < agent.duration < 60


def test_a_failed_call_is_kept_with_its_error(kept: RunSpanProcessor, scripted_llm: Any) -> None:
    scripted_llm(raise_(InferenceError("the model is down")))
    row = services.run_robot("s-1", "echo", "Hi", raise_errors=False)
    assert row.status == Status.FAILED
    kept.force_flush()
    stored = _tree(row)
    assert stored["chat"].status == stored["invoke_agent echo"].status == "error"
    assert stored["chat"].attributes["error.type"] == "robotlab.errors.InferenceError"
    assert "the model is down" in stored["chat"].status_message


def test_contents_are_kept_only_when_asked(kept: RunSpanProcessor, scripted_llm: Any) -> None:
    get_config().capture_content = True
    scripted_llm(text("Hello there."))
    row = services.run_robot("s-1", "echo", "Hi")
    kept.force_flush()
    chat = RunSpan.objects.get(result=row, name="chat")
    assert "Hello there." in chat.attributes["gen_ai.output.messages"]
    assert "Hi" in chat.attributes["gen_ai.input.messages"]


def test_a_network_turn_in_one_process_keeps_its_workflow_over_its_robots(kept: RunSpanProcessor,
                                                                           scripted_llm: Any) -> None:
    scripted_llm(text("billing"), text("Your invoice is attached."))
    row = services.run_robot("s-1", "helpdesk", "Where is my invoice?")
    assert row.status == Status.COMPLETED
    kept.force_flush()
    stored = list(RunSpan.objects.filter(result=row))
    workflow = next(s for s in stored if s.name == "invoke_workflow helpdesk")
    agents = [s for s in stored if s.name.startswith("invoke_agent ")]
    assert sorted(s.name for s in agents) == ["invoke_agent billing_agent", "invoke_agent classifier"]
    assert {s.parent_span_id for s in agents} == {workflow.span_id}
    assert {s.trace_id for s in stored} == {workflow.trace_id}


def test_spans_outside_the_apps_runs_are_not_kept(kept: RunSpanProcessor, spans: Recorder) -> None:
    robotlab.build(name="loose", llm=FakeLLM([text("Hi.")])).run("Hello")
    assert spans.one("invoke_agent loose")  # traced by the core...
    kept.force_flush()
    assert not RunSpan.objects.exists()  # ...but no row of the app ran it


def test_nothing_is_kept_with_the_setting_off(kept: RunSpanProcessor, settings: Any, spans: Recorder,
                                              scripted_llm: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "TRACES": False}
    scripted_llm(text("Hi."))
    services.run_robot("s-1", "echo", "Hi")
    assert spans.one("invoke_agent echo")  # the project's own exporters still get them
    kept.force_flush()
    assert not RunSpan.objects.exists()


def test_spans_of_a_run_erased_before_they_are_written_are_dropped(kept: RunSpanProcessor,
                                                                    scripted_llm: Any) -> None:
    scripted_llm(text("Hi."), text("Hello again."))
    gone = services.run_robot("s-gone", "echo", "Hi")
    row = services.run_robot("s-1", "echo", "Hi")
    Thread.objects.filter(pk=gone.thread_id).delete()
    kept.force_flush()
    assert set(RunSpan.objects.values_list("result_id", flat=True)) == {row.pk}


def test_spans_go_with_their_threads_when_pruned(kept: RunSpanProcessor, scripted_llm: Any) -> None:
    scripted_llm(text("Hi."), text("Hello again."))
    old = services.run_robot("s-old", "echo", "Hi")
    new = services.run_robot("s-new", "echo", "Hi")
    kept.force_flush()
    Thread.objects.filter(pk=old.thread_id).update(updated_at=timezone.now() - dt.timedelta(days=100))
    prune_threads(dt.timedelta(days=90))
    assert set(RunSpan.objects.values_list("result_id", flat=True)) == {new.pk}
    assert not RobotResult.objects.filter(pk=old.pk).exists()


def test_spans_go_with_their_user_when_erased(kept: RunSpanProcessor, scripted_llm: Any) -> None:
    ada = get_user_model().objects.create_user("ada")
    scripted_llm(text("Hi."), text("Hello again."))
    mine = services.run_robot("s-ada", "echo", "Hi", user=ada)
    other = services.run_robot("s-other", "echo", "Hi")
    kept.force_flush()
    assert RunSpan.objects.filter(result=mine).exists()
    erase_user(ada)
    assert set(RunSpan.objects.values_list("result_id", flat=True)) == {other.pk}


def test_a_span_model_that_is_not_for_the_result_model_keeps_nothing_and_fails_no_run(
        kept: RunSpanProcessor, settings: Any, scripted_llm: Any) -> None:
    scripted_llm(text("Hi."), text("Hello again."))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "SPAN_MODEL": "robotlab.RunStep"}  # no result pointing at results
    assert services.run_robot("s-1", "echo", "Hi").status == Status.COMPLETED
    settings.ROBOTLAB = {**settings.ROBOTLAB, "SPAN_MODEL": "robotlab.Nowhere"}
    assert services.run_robot("s-1", "echo", "Hi").status == Status.COMPLETED
    kept.force_flush()
    assert not RunSpan.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_batch_the_database_refuses_for_a_moment_is_written_on_a_later_try(scripted_llm: Any) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's shared in-memory test database refuses a locked table at once; PostgreSQL waits")
    scripted_llm(text("Hi."))
    row = services.run_robot("s-busy", "echo", "Hi")
    span = {"result_id": row.pk, "trace_id": "1" * 32, "span_id": "2" * 16, "name": "late", "kind": "internal",
            "started_at": timezone.now(), "ended_at": timezone.now()}
    locked, refused, released = threading.Event(), threading.Event(), threading.Event()

    class Refusals(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "retrying" in record.getMessage():
                refused.set()

    def hold() -> None:  # another connection writes the span table and keeps its transaction open a while
        with transaction.atomic():
            RunSpan.objects.create(**{**span, "span_id": "3" * 16, "name": "held"})
            locked.set()
            refused.wait(10)
        connections.close_all()
        released.set()

    handler, logger = Refusals(), logging.getLogger("robotlab_django")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        assert store([span]) == 1  # refused while the other transaction held the database, written once it ended
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        holder.join(10)
    assert refused.is_set() and released.is_set()
    assert RunSpan.objects.get(span_id="2" * 16).name == "late"
