"""Running robots on threads: persistence, history restore, failures, bad input, settings applied."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.db.models.signals import pre_save

import robotlab
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.registry import UnknownRobotError
from robotlab_django.runs import executor
from robotlab_django.runs.records import append_results

pytestmark = pytest.mark.django_db


def test_run_robot_stores_the_whole_run() -> None:
    llm = FakeLLM([tool_call("add", id="c1", a=2, b=3), text("It is 5.", usage=(40, 7), cost=0.00125)])
    row = services.run_robot("s1", "calculator", "What is 2+3?", llm=llm)
    row.refresh_from_db()
    assert (row.status, row.sequence_number, row.robot_name, row.input, row.reply) == (
        Status.COMPLETED, 1, "calculator", "What is 2+3?", "It is 5.")
    assert row.messages == [
        {"role": "user", "content": "What is 2+3?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "5"},
        {"role": "assistant", "content": "It is 5."},
    ]
    assert row.output_data[0]["content"] == "It is 5."
    assert row.tool_calls_data[0]["tool"]["name"] == "add" and row.tool_calls_data[0]["content"] == {"data": 5}
    assert row.cost == Decimal("0.00125000")
    assert row.output_tokens >= 7 and row.input_tokens >= 40
    assert row.model == "fake" and row.stop_reason == "stop" and len(row.checksum) == 64
    assert row.duration is not None and row.duration >= 0
    assert row.started_at and row.finished_at and row.attempts == 1 and row.error == ""
    thread = Thread.objects.get(session_id="s1")
    assert (thread.robot_name, thread.initial_input, thread.last_user_message) == (
        "calculator", "What is 2+3?", "What is 2+3?")
    assert thread.last_user_message_at is not None


def test_a_second_run_continues_the_conversation_with_tool_calls_in_order() -> None:
    first = FakeLLM([tool_call("add", id="c1", a=1, b=1), text("Two.")])
    services.run_robot("s1", "calculator", "1+1?", llm=first)
    second = FakeLLM([text("You asked 1+1.")])
    row = services.run_robot("s1", "calculator", "What did I ask?", llm=second)
    sent = second.requests[0].messages
    assert [message["role"] for message in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert sent[2]["tool_calls"][0]["function"]["name"] == "add"
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "name": "add", "content": "2"}
    assert row.sequence_number == 2
    assert Thread.objects.get(session_id="s1").initial_input == "1+1?"


def test_restore_robot_rebuilds_the_same_conversation(django_assert_max_num_queries: Any) -> None:
    llm = FakeLLM([tool_call("add", a=1, b=2), text("3"), text("Sure")])
    services.run_robot("s1", "calculator", "1+2?", llm=llm)
    services.run_robot("s1", "calculator", "thanks", llm=llm)
    original = llm.requests[-1].messages[1:] + [{"role": "assistant", "content": "Sure"}]
    with django_assert_max_num_queries(3):
        restored = services.restore_robot("s1", llm=FakeLLM())
    assert restored.messages == original
    assert restored.name == "calculator"


def test_unknown_robot_changes_nothing() -> None:
    with pytest.raises(UnknownRobotError, match="Unknown robot 'nobody'"):
        services.run_robot("s1", "nobody", "hello")
    assert (Thread.objects.count(), RobotResult.objects.count()) == (0, 0)


def test_too_long_a_message_changes_nothing(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_MESSAGE_LENGTH": 10}
    with pytest.raises(ValueError, match="limit is 10"):
        services.run_robot("s1", "echo", "x" * 11)
    assert (Thread.objects.count(), RobotResult.objects.count()) == (0, 0)


def test_bad_session_ids_and_thread_arguments() -> None:
    with pytest.raises(ValueError, match="1 to 255"):
        services.get_thread("x" * 256)
    with pytest.raises(Thread.DoesNotExist):
        services.get_thread("missing", create=False)
    with pytest.raises(TypeError, match="not the thread model"):
        services.get_thread(RobotResult())
    thread = services.get_thread(None)
    assert services.get_thread(thread.pk) == thread == services.get_thread(thread.session_id)


def test_a_failed_run_is_stored_and_raised_and_left_out_of_history() -> None:
    llm = FakeLLM([raise_(RuntimeError("provider exploded <b>"))])
    with pytest.raises(services.RunFailedError, match="provider exploded") as raised:
        services.run_robot("s1", "echo", "hello", llm=llm)
    row = raised.value.result
    assert isinstance(raised.value.__cause__, RuntimeError)
    row.refresh_from_db()
    assert (row.status, row.error_type, row.error) == (Status.FAILED, "RuntimeError", "provider exploded <b>")
    assert row.messages == [{"role": "user", "content": "hello"}]
    follow_up = FakeLLM([text("ok")])
    services.run_robot("s1", "echo", "again", llm=follow_up)
    assert [m["content"] for m in follow_up.requests[0].messages[1:]] == ["again"]


def test_raise_errors_false_returns_the_failed_row() -> None:
    row = services.run_robot("s1", "echo", "hello", llm=FakeLLM([]), raise_errors=False)
    assert row.status == Status.FAILED and row.error_type == "FakeLLMExhausted"


def test_a_claimed_run_is_not_run_twice() -> None:
    llm = FakeLLM([text("once")])
    row = services.run_robot("s1", "echo", "hello", llm=llm)
    again = services.execute_run(row.pk, llm=llm)
    assert again.status == Status.COMPLETED and len(llm.requests) == 1


def test_sequence_numbers_are_gap_free() -> None:
    llm = FakeLLM(default=text("ok"))
    numbers = [services.run_robot("s1", "echo", f"m{i}", llm=llm).sequence_number for i in range(5)]
    assert numbers == [1, 2, 3, 4, 5]


def test_append_result_retries_a_sequence_clash() -> None:
    thread = services.get_thread("s1")
    clashes: list[int] = []

    def collide(sender: type, instance: RobotResult, **kwargs: Any) -> None:
        if not clashes and instance.pk is None:
            clashes.append(instance.sequence_number)
            RobotResult.objects.bulk_create([RobotResult(thread=thread, sequence_number=instance.sequence_number,
                                                         robot_name="intruder")])

    pre_save.connect(collide, sender=RobotResult)
    try:
        row = services.append_result(thread, robot_name="echo", input="hi")
    finally:
        pre_save.disconnect(collide, sender=RobotResult)
    assert clashes == [1]
    assert row.sequence_number == 1
    assert list(RobotResult.objects.values_list("robot_name", flat=True)) == ["echo"]


def test_append_results_without_a_savepoint_fails_the_callers_transaction_on_a_clash() -> None:
    thread = services.get_thread("s1")
    clashes: list[int] = []

    def collide(sender: type, instance: RobotResult, **kwargs: Any) -> None:
        if instance.pk is None:
            clashes.append(instance.sequence_number)
            RobotResult.objects.bulk_create([RobotResult(thread=thread, sequence_number=instance.sequence_number,
                                                         robot_name="intruder")])

    try:
        with pytest.raises(IntegrityError), transaction.atomic():  # the caller's transaction
            RobotResult.objects.create(thread=thread, sequence_number=99, robot_name="callers")
            pre_save.connect(collide, sender=RobotResult)
            append_results(thread, [{"robot_name": "echo", "input": "hi"}], savepoint=False)
    finally:
        pre_save.disconnect(collide, sender=RobotResult)
    assert clashes == [100]  # tried once, after the caller's row
    assert not RobotResult.objects.exists()  # the caller's work went with it


def test_append_results_numbers_several_rows_in_order_under_one_lock() -> None:
    thread = services.get_thread("s1")
    services.append_result(thread, robot_name="echo", input="first")
    rows = append_results(thread, [{"robot_name": "a", "task_name": "x"}, {"robot_name": "b", "input": "later"},
                                   {"robot_name": "c", "task_name": "z"}])
    assert [(r.sequence_number, r.robot_name) for r in rows] == [(2, "a"), (3, "b"), (4, "c")]
    assert all(r.pk is not None for r in rows)
    thread.refresh_from_db()
    assert (thread.last_user_message, thread.initial_input, thread.robot_name) == ("later", "first", "echo")


def test_the_owner_is_set_on_new_threads(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("ann")
    row = services.run_robot(None, "echo", "hi", user=user, llm=FakeLLM([text("hello")]))
    assert row.thread.user == user


def test_events_reach_on_event() -> None:
    events: list[Any] = []
    row = services.run_robot("s1", "echo", "hi", llm=FakeLLM([text("hello there")]), on_event=events.append)
    kinds = [event.kind for event in events]
    assert kinds[0] == "run.started" and kinds[-1] == "stream.ended" and "text.delta" in kinds
    assert {event.run_id for event in events} == {row.run_id}


def test_non_json_tool_results_are_stored() -> None:
    def tags() -> set[str]:
        """Some tags."""
        return {"b", "a"}

    from robotlab_django.registry import registry

    registry.register(lambda **options: robotlab.build(name="tagger", local_tools=[tags], **options), name="tagger")
    try:
        row = services.run_robot("s1", "tagger", "tags?", llm=FakeLLM([tool_call("tags"), text("a and b")]))
    finally:
        registry.unregister("tagger")
    row.refresh_from_db()
    assert row.tool_calls_data[0]["content"]["data"] == ["a", "b"]


# -- settings applied to app-built robots ---------------------------------------------------
def test_llm_setting_is_used_when_the_caller_gives_none(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("from settings"))
    assert services.run_robot("s1", "echo", "hi").reply == "from settings"
    assert len(llm.requests) == 1


def test_default_model_fills_in_only_when_the_robot_sets_none(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "DEFAULT_MODEL": "openai/gpt-4o-mini", "MAX_TOOL_ROUNDS": 4}
    robot = services.build_robot("echo")
    assert robot.model == "openai/gpt-4o-mini" and robot.config.max_tool_rounds == 4
    assert services.build_robot("echo", model="anthropic/claude-x", max_tool_rounds=2).model == "anthropic/claude-x"
    assert services.build_robot("echo", max_tool_rounds=2).config.max_tool_rounds == 2


def test_connection_settings_build_the_default_transport(settings: Any) -> None:
    from robotlab.llm import AutoLLM, LLMClient

    settings.ROBOTLAB = {"API_BASE": "http://127.0.0.1:9/v1", "REQUEST_TIMEOUT": 7, "LLM_MAX_RETRIES": 1,
                         "LLM_TRANSPORT": "litellm"}
    llm = services.build_robot("echo").llm
    assert isinstance(llm, AutoLLM)
    assert (llm.api_base, llm.timeout, llm.num_retries, llm.transport) == ("http://127.0.0.1:9/v1", 7, 1, "litellm")
    name, client = llm.route("openai/gpt-4o-mini")
    assert name == "litellm" and isinstance(client, LLMClient)
    assert (client.api_base, client.timeout, client.num_retries) == ("http://127.0.0.1:9/v1", 7, 1)


# -- re-run and the executors -----------------------------------------------------------
def test_rerun_last_user_message_runs_it_again(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("first"), text("second"))
    services.run_robot("s1", "echo", "hello")
    row = services.rerun_last_user_message("s1")
    row.refresh_from_db()
    assert (row.sequence_number, row.input, row.reply, row.status) == (2, "hello", "second", Status.COMPLETED)
    assert [m["content"] for m in llm.requests[1].messages[1:]] == ["hello", "first", "hello"]


def test_rerun_needs_a_user_message() -> None:
    thread = services.get_thread("empty")
    with pytest.raises(services.NothingToRerunError, match="no user message"):
        services.rerun_last_user_message(thread)


@pytest.mark.django_db(transaction=True)
def test_thread_executor_runs_after_commit(settings: Any, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("from the background"))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread"}
    row = services.start_run("s1", "echo", "hi")
    executor.dispatch(row)
    assert executor.join(timeout=10)
    row.refresh_from_db()
    assert (row.status, row.reply) == (Status.COMPLETED, "from the background")


def test_an_unknown_executor_is_a_configuration_error(settings: Any) -> None:
    from django.core.exceptions import ImproperlyConfigured

    settings.ROBOTLAB = {"EXECUTOR": "rq"}
    with pytest.raises(ImproperlyConfigured, match="choose one of: thread, sync, celery"):
        executor.dispatch(1)


@pytest.mark.django_db(transaction=True)
async def test_arun_robot() -> None:
    from asgiref.sync import sync_to_async
    from django.db import connections

    try:
        await _arun_twice()
    finally:  # the ORM ran in asgiref's worker thread; close its connection as a request's end would
        await sync_to_async(connections.close_all)()


async def _arun_twice() -> None:
    row = await services.arun_robot("s1", "calculator", "2+2?",
                                    llm=FakeLLM([tool_call("add", a=2, b=2), text("4")]))
    assert (row.status, row.reply, row.sequence_number) == (Status.COMPLETED, "4", 1)
    failed = await services.arun_robot("s1", "calculator", "again", llm=FakeLLM([]), raise_errors=False)
    assert failed.status == Status.FAILED
