"""Parked runs and cancel: AskUser parks a Django run, the owner's answer resumes it, a cancel stops it.

``transaction=True``: steps are checkpointed on their own connection, and the cancel watcher reads the
row from another thread.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import connections
from django.urls import reverse
from django.utils import timezone

import robotlab
from robotlab.llm.types import LLMRequest, LLMResponse
from robotlab.testing import FakeLLM, text, tool_call
from robotlab.tools import AskUser
from robotlab_django import services
from robotlab_django.models import RobotResult, RunEvent, RunStep, Status, Thread
from robotlab_django.registry import registry
from robotlab_django.runs import control as run_control
from robotlab_django.runs import executor, runner
from robotlab_django.runs.records import start_run
from robotlab_django.streaming import event_stream
from robotlab_django.streaming.broadcast import thread_group

pytestmark = pytest.mark.django_db(transaction=True)

ASK = "robot_lab--ask_user"


@pytest.fixture
def planner(clean_registry: None) -> None:
    """A robot that may ask its user."""

    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="planner", system_prompt="You pick plans.", local_tools=[AskUser], **options)

    registry.register(build, name="planner", replace=True)


@pytest.fixture
def owner() -> Any:
    return get_user_model().objects.create_user("owner", password="pw")


def _park(scripted_llm: Callable[..., FakeLLM], owner: Any) -> tuple[RobotResult, FakeLLM]:
    llm = scripted_llm(tool_call(ASK, question="Which plan?", choices=["basic", "pro"], usage=(4, 1)))
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = services.run_robot(thread, "planner", "Sign me up", raise_errors=False)
    return row, llm


def _kinds(row: RobotResult) -> list[str]:
    return list(RunEvent.objects.filter(result=row).order_by("seq").values_list("kind", flat=True))


def test_ask_user_parks_the_run_and_the_answer_resumes_it_without_reissuing_steps(
        scripted_llm: Callable[..., FakeLLM], planner: None, owner: Any) -> None:
    row, first = _park(scripted_llm, owner)
    assert row.status == Status.AWAITING
    assert row.question["question"] == "Which plan?" and row.question["choices"] == ["basic", "pro"]
    assert len(first.requests) == 1 and RunStep.objects.filter(result=row).count() == 1
    kinds = _kinds(row)
    assert "hitl.requested" in kinds and "run.failed" not in kinds and "stream.ended" not in kinds

    again = scripted_llm(text("You are on pro."))
    done = run_control.answer(row, "2", owner)
    assert done.status == Status.COMPLETED and done.reply == "You are on pro."
    assert len(again.requests) == 1  # the LLM call before the question was replayed, not sent again
    assert again.requests[0].messages[-1]["content"] == "pro"  # "2" picked the second choice
    assert done.answers[0]["question"] == "Which plan?" and done.question == {}
    kinds = _kinds(done)
    assert kinds.index("hitl.resolved") > kinds.index("hitl.requested")
    assert kinds[-2:] == ["run.completed", "stream.ended"]


def test_only_the_owner_answers_an_awaiting_run(scripted_llm: Callable[..., FakeLLM], planner: None,
                                                 owner: Any) -> None:
    row, _llm = _park(scripted_llm, owner)
    other = get_user_model().objects.create_user("other", password="pw")
    with pytest.raises(run_control.NotOwnerError, match="not on a thread of yours"):
        run_control.answer(row, "1", other)
    with pytest.raises(run_control.NotOwnerError):
        run_control.cancel(row, other)
    row.refresh_from_db()
    assert row.status == Status.AWAITING


def test_answering_a_run_that_waits_on_nothing_is_a_clear_error(scripted_llm: Callable[..., FakeLLM],
                                                               planner: None, owner: Any) -> None:
    scripted_llm(text("Hello."))
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = services.run_robot(thread, "planner", "Hi")
    with pytest.raises(run_control.NotAwaitingError, match="completed, not awaiting an answer"):
        run_control.answer(row, "yes", owner)
    with pytest.raises(run_control.RunFinishedError, match="completed: it finished, nothing to cancel"):
        run_control.cancel(row, owner)


def test_cancelling_an_awaiting_run_ends_it_and_says_so(scripted_llm: Callable[..., FakeLLM], planner: None,
                                                       owner: Any) -> None:
    row, _llm = _park(scripted_llm, owner)
    done = run_control.cancel(row, owner)
    assert done.status == Status.CANCELLED and done.is_finished
    assert _kinds(done)[-2:] == ["run.cancelled", "stream.ended"]
    with pytest.raises(run_control.NotAwaitingError):
        run_control.answer(done, "1", owner)


def test_a_run_parked_past_ask_timeout_fails_with_a_clear_error(scripted_llm: Callable[..., FakeLLM],
                                                               planner: None, owner: Any) -> None:
    row, _llm = _park(scripted_llm, owner)
    assert run_control.expire_parked(timeout=3600) == []
    RobotResult.objects.filter(pk=row.pk).update(parked_at=timezone.now() - timezone.timedelta(hours=2))
    assert run_control.expire_parked(timeout=3600) == [row.pk]
    row.refresh_from_db()
    assert row.status == Status.FAILED and row.error_type == "AskTimeout"
    assert "No answer to 'Which plan?' within ROBOTLAB['ASK_TIMEOUT'] (3600 s)" in row.error


class SlowLLM:
    """Streams ``chunks`` words, one every ``pause`` seconds; ``sent`` is set once the first went out."""

    def __init__(self, chunks: int = 400, pause: float = 0.02) -> None:
        self.chunks, self.pause = chunks, pause
        self.sent = threading.Event()

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        parts = []
        for index in range(self.chunks):
            part = f"w{index} "
            parts.append(part)
            if on_text is not None:
                on_text(part)
            self.sent.set()
            await asyncio.sleep(self.pause)
        return LLMResponse(content="".join(parts), finish_reason="stop")


def test_cancel_stops_a_streaming_reply_within_a_second_and_keeps_the_partial_text(
        settings: Any, planner: None, owner: Any, postgres: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL (the run writes from its thread while this one cancels: the in-memory SQLite database
    locks whole tables); the browser test checks the same on the example project's SQLite file.

    The cancel comes once "w0 w1 " is stored (a spy on the store, calling through): on a loaded machine the
    first emitted delta may still be the only one stored when the cancel reads the row's events.
    """
    llm = SlowLLM()
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = start_run(thread, "planner", "Write a lot")
    streamed, stored_text = threading.Event(), []
    persist = event_stream.persist_events

    def spy(thread_id: Any, result_id: Any, events: Any) -> Any:
        stored = persist(thread_id, result_id, events)
        stored_text.extend(str(e.data.get("text") or "") for e in events if e.kind == "text.delta")
        if "".join(stored_text).startswith("w0 w1 "):
            streamed.set()
        return stored

    monkeypatch.setattr(event_stream, "persist_events", spy)

    def work() -> None:
        try:
            services.execute_run(row.pk, raise_errors=False)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work)
    worker.start()
    assert streamed.wait(10)
    asked = time.monotonic()
    run_control.cancel(row, owner)
    worker.join(5)
    stopped = time.monotonic() - asked
    assert not worker.is_alive() and stopped < 1.0
    row.refresh_from_db()
    assert row.status == Status.CANCELLED
    assert row.reply.startswith("w0 w1 ") and len(row.reply.split()) < llm.chunks
    assert _kinds(row)[-2:] == ["run.cancelled", "stream.ended"]


def test_a_cancel_stores_the_reply_streamed_so_far_at_once(planner: None, owner: Any) -> None:
    """The cancel itself keeps the text the run streamed (its stored events), so the row is never ``cancelled``
    with an empty reply while its runner, maybe in another process, has not noticed yet."""
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = start_run(thread, "planner", "Write a lot")
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RUNNING)
    for seq, data in enumerate([{"text": "Hel"}, {"text": "lo "}, {"text": "other", "task": "t"}, {"text": "you"}], 1):
        RunEvent.objects.create(thread=thread, result=row, run_id=row.run_id, seq=seq, kind="text.delta", ts=0.0,
                                data=data)
    RunEvent.objects.create(thread=thread, result=row, run_id=row.run_id, seq=5, kind="step.started", ts=0.0,
                            data={"text": "not a delta"})
    cancelled = run_control.cancel(row, owner)
    assert cancelled.status == Status.CANCELLED and cancelled.reply == "Hello you"


class CancelledMidCall:
    """Finishes its reply normally, but the row is cancelled (as from another process) while it answers."""

    def __init__(self, pk: Any) -> None:
        self.pk = pk

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        if on_text is not None:
            on_text("All ")
        await asyncio.to_thread(self._cancel)
        if on_text is not None:
            on_text("done.")
        return LLMResponse(content="All done.", finish_reason="stop")

    def _cancel(self) -> None:
        try:
            RobotResult.objects.filter(pk=self.pk).update(status=Status.CANCELLED)
        finally:
            connections.close_all()


def test_a_run_that_finishes_as_it_is_cancelled_stays_cancelled_with_its_reply(
        settings: Any, planner: None, owner: Any, postgres: None) -> None:
    """The first end written wins: the cancel landed before the finished run was stored, so the row stays
    ``cancelled`` (keeping the whole reply) and its last events say so, not ``completed``. On PostgreSQL: the
    in-memory SQLite database locks whole tables against the second connection that cancels."""
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = start_run(thread, "planner", "Say done")
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: CancelledMidCall(row.pk), "CANCEL_POLL_INTERVAL": 60}
    result = services.execute_run(row.pk, raise_errors=False)
    assert result.status == Status.CANCELLED
    row.refresh_from_db()
    assert row.status == Status.CANCELLED and row.reply == "All done."
    assert _kinds(row)[-2:] == ["run.cancelled", "stream.ended"]
    with pytest.raises(run_control.RunFinishedError, match="it finished, nothing to cancel"):
        run_control.cancel(row, owner)


def test_a_network_task_that_asks_parks_its_row_and_the_turn_waits_until_the_answer(
        scripted_llm: Callable[..., FakeLLM], settings: Any, clean_registry: None, owner: Any) -> None:
    from robotlab.network import create_network

    def asknet(**options: Any) -> Any:
        network = create_network(name="asknet")
        network.task("planner", robotlab.build(name="planner", system_prompt="You pick plans.",
                                               local_tools=[AskUser], **options))
        return network

    registry.register_network(asknet, name="asknet", replace=True)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    first = scripted_llm(tool_call(ASK, question="Which plan?", choices=["basic", "pro"]))
    thread = Thread.objects.create(user=owner, robot_name="asknet")
    turn = start_run(thread, "asknet", "Sign me up")
    executor.dispatch(turn)
    turn.refresh_from_db()
    [task] = RobotResult.objects.filter(parent_id=turn.pk)
    assert (turn.status, task.status) == (Status.AWAITING, Status.AWAITING)
    assert turn.question["question"] == task.question["question"] == "Which plan?"
    assert len(first.requests) == 1

    again = scripted_llm(text("Pro it is."))
    done = run_control.answer(turn, "2", owner)  # the turn's row forwards the answer to its waiting task
    task.refresh_from_db()
    assert (done.status, done.reply) == (Status.COMPLETED, "Pro it is.")
    assert (task.status, task.reply, task.answers[0]["answer"]) == (Status.COMPLETED, "Pro it is.", "2")
    assert len(again.requests) == 1 and again.requests[0].messages[-1]["content"] == "pro"


def test_a_one_process_network_turn_resumes_without_reissuing_its_completed_robots(
        scripted_llm: Callable[..., FakeLLM], settings: Any, clean_registry: None, owner: Any) -> None:
    """A turn run in one process (no task rows) parks on its second robot's question; the answer resumes it.

    Each robot of the turn is checkpointed in its own block of steps on the turn's row, so the robot that
    ran before the question (``intake``) and the question's LLM call are replayed, not sent again.
    """
    from robotlab.network import create_network

    def asknet(**options: Any) -> Any:
        network = create_network(name="asknet")
        network.task("intake", robotlab.build(name="intake", system_prompt="You sort requests.", **options))
        network.task("planner", robotlab.build(name="planner", system_prompt="You pick plans.",
                                               local_tools=[AskUser], **options), depends_on=["intake"])
        return network

    registry.register_network(asknet, name="asknet", replace=True)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": False}
    first = scripted_llm(text("a plan request", usage=(3, 1)),
                         tool_call(ASK, question="Which plan?", choices=["basic", "pro"]))
    turn = start_run(Thread.objects.create(user=owner, robot_name="asknet"), "asknet", "Sign me up")
    executor.dispatch(turn)
    turn.refresh_from_db()
    assert turn.status == Status.AWAITING and turn.question["question"] == "Which plan?"
    assert len(first.requests) == 2 and RunStep.objects.filter(result=turn).count() == 2

    again = scripted_llm(text("Pro it is."))
    done = run_control.answer(turn, "2", owner)
    assert (done.status, done.reply) == (Status.COMPLETED, "Pro it is.")
    assert len(again.requests) == 1  # intake's call and the question's call were replayed
    assert again.requests[0].messages[-1]["content"] == "pro"
    rows = RobotResult.objects.filter(parent_id=turn.pk).order_by("pk")
    assert [(r.robot_name, r.status, r.reply) for r in rows] == [
        ("intake", Status.COMPLETED, "a plan request"), ("planner", Status.COMPLETED, "Pro it is.")]


def test_cancelling_a_waiting_network_turn_cancels_its_waiting_task(
        scripted_llm: Callable[..., FakeLLM], settings: Any, clean_registry: None, owner: Any) -> None:
    from robotlab.network import create_network

    def asknet(**options: Any) -> Any:
        network = create_network(name="asknet")
        network.task("planner", robotlab.build(name="planner", local_tools=[AskUser], **options))
        return network

    registry.register_network(asknet, name="asknet", replace=True)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    scripted_llm(tool_call(ASK, question="Which plan?"))
    turn = start_run(Thread.objects.create(user=owner, robot_name="asknet"), "asknet", "Sign me up")
    executor.dispatch(turn)
    done = run_control.cancel(turn, owner)
    [task] = RobotResult.objects.filter(parent_id=turn.pk)
    assert (done.status, task.status) == (Status.CANCELLED, Status.CANCELLED)
    assert _kinds(done)[-2:] == ["run.cancelled", "stream.ended"]


def test_cancelling_one_task_row_of_a_distributed_turn_cancels_its_turn(
        scripted_llm: Callable[..., FakeLLM], settings: Any, clean_registry: None, owner: Any, client: Any) -> None:
    """Issue 25 item 9: a cancel sent for a task row (the socket's or the endpoint's) ends its whole turn.

    Before, the task row alone was cancelled and the turn stayed unfinished until its attempts ran out.
    """
    from robotlab.network import create_network
    from tests.robotlab_django.chat.test_views import URLCONF

    def twotasks(**options: Any) -> Any:
        network = create_network(name="twotasks")
        network.task("intake", robotlab.build(name="intake", **options))
        network.task("planner", robotlab.build(name="planner", local_tools=[AskUser], **options),
                     depends_on=["intake"])
        return network

    registry.register_network(twotasks, name="twotasks", replace=True)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    settings.ROOT_URLCONF = URLCONF
    scripted_llm(text("a plan request"), tool_call(ASK, question="Which plan?"))
    turn = start_run(Thread.objects.create(user=owner, robot_name="twotasks"), "twotasks", "Sign me up")
    executor.dispatch(turn)
    intake, planner = RobotResult.objects.filter(parent_id=turn.pk).order_by("pk")
    assert (intake.status, planner.status) == (Status.COMPLETED, Status.AWAITING)
    client.force_login(owner)
    url = reverse("robotlab:post_cancel", kwargs={"pk": turn.thread_id, "result_pk": planner.pk})
    response = client.post(url, HTTP_ACCEPT="application/json")
    assert response.status_code == 202 and response.json()["result"]["status"] == "cancelled"
    turn.refresh_from_db()
    planner.refresh_from_db()
    intake.refresh_from_db()
    assert (turn.status, planner.status, intake.status) == (Status.CANCELLED, Status.CANCELLED, Status.COMPLETED)
    assert _kinds(turn)[-2:] == ["run.cancelled", "stream.ended"]
    # a finished task row is not a way to cancel its turn: nothing to cancel there
    with pytest.raises(run_control.RunFinishedError, match="nothing to cancel"):
        run_control.cancel(intake, owner)


def test_the_post_endpoints_answer_and_cancel_for_the_owner_only(scripted_llm: Callable[..., FakeLLM],
                                                               planner: None, owner: Any, client: Any,
                                                               settings: Any) -> None:
    from tests.robotlab_django.chat.test_views import URLCONF

    settings.ROOT_URLCONF = URLCONF

    row, _llm = _park(scripted_llm, owner)
    answer_url = reverse("robotlab:post_answer", kwargs={"pk": row.thread_id, "result_pk": row.pk})
    cancel_url = reverse("robotlab:post_cancel", kwargs={"pk": row.thread_id, "result_pk": row.pk})
    json_accept = {"HTTP_ACCEPT": "application/json"}
    client.force_login(get_user_model().objects.create_user("other", password="pw"))
    assert client.post(cancel_url, **json_accept).status_code == 404
    assert client.post(answer_url, {"answer": "1"}, **json_accept).status_code == 404
    client.force_login(owner)
    scripted_llm(text("Basic it is."))
    answered = client.post(answer_url, {"answer": "1"}, **json_accept)
    assert answered.status_code == 202 and answered.json()["result"]["status"] == "completed"
    again = client.post(cancel_url, **json_accept)
    assert again.status_code == 409 and "nothing to cancel" in again.json()["error"]


def test_the_admin_lists_awaiting_runs_with_their_question(scripted_llm: Callable[..., FakeLLM], planner: None,
                                                           owner: Any, admin_client: Any) -> None:
    """Issue 13: staff find the parked runs by status, and the list shows the question each waits on."""
    row, _ = _park(scripted_llm, owner)
    body = admin_client.get("/admin/robotlab/robotresult/?status=awaiting").content.decode()
    assert "awaiting an answer: Which plan? [basic / pro]" in body
    assert f"/admin/robotlab/robotresult/{row.pk}/change/" in body
    assert "Which plan?" not in admin_client.get("/admin/robotlab/robotresult/?status=completed").content.decode()


class ClassifyThenStream(SlowLLM):
    """Answers ``billing`` to the classifier, then streams ``w0 w1 ...`` slowly as the specialist."""

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        if "Answer with one word" in str(request.messages[0].get("content", "")):
            return LLMResponse(content="billing", finish_reason="stop")
        return await super().complete(request, on_text=on_text)


def test_a_cancelled_distributed_turn_keeps_what_its_running_task_streamed(
        settings: Any, owner: Any, postgres: None) -> None:
    """Issue 26 (5): the running task's row and the turn's row keep the text streamed so far, the task's row has one
    ``run.cancelled``, and the turn's ``run.cancelled`` (sent once that task stopped) carries that text."""
    llm = ClassifyThenStream()
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    thread = Thread.objects.create(user=owner, robot_name="helpdesk")
    turn = start_run(thread, "helpdesk", "I was charged twice")

    def work() -> None:
        try:
            executor.dispatch(turn)
        finally:
            connections.close_all()

    worker = threading.Thread(target=work)
    worker.start()
    deadline = time.monotonic() + 20
    while "w2 " not in "".join(str(data.get("text")) for data in RunEvent.objects.filter(
            result__parent_id=turn.pk, kind="text.delta").order_by("pk").values_list("data", flat=True)):
        assert time.monotonic() < deadline, ("the billing task never streamed", list(
            RunEvent.objects.filter(thread=thread).values_list("kind", "data")), list(
            RobotResult.objects.filter(thread=thread).values_list("task_name", "status", "error")))
        time.sleep(0.02)
    run_control.cancel(turn, owner)
    worker.join(10)
    assert not worker.is_alive()
    turn.refresh_from_db()
    billing = RobotResult.objects.get(parent_id=turn.pk, task_name="billing")
    assert (turn.status, billing.status) == (Status.CANCELLED, Status.CANCELLED)
    assert billing.reply.startswith("w0 w1 w2 ") and len(billing.reply.split()) < llm.chunks
    assert turn.reply == billing.reply
    task_kinds = list(RunEvent.objects.filter(result=billing).order_by("pk").values_list("kind", flat=True))
    assert task_kinds.count("run.cancelled") == 1 and task_kinds[-1] == "stream.ended"
    turn_events = list(RunEvent.objects.filter(result=turn).order_by("pk"))
    assert [e.kind for e in turn_events][-2:] == ["run.cancelled", "stream.ended"]
    assert [e.kind for e in turn_events].count("run.cancelled") == 1
    assert turn_events[-2].data["reply"] == turn.reply
    last_task_event = RunEvent.objects.filter(result=billing).order_by("-pk").first()
    assert last_task_event is not None and turn_events[-1].pk > last_task_event.pk


class ClassifyThenCancelled(CancelledMidCall):
    """Answers ``billing`` to the classifier; as the specialist, its turn and task are cancelled while it answers."""

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        if "Answer with one word" in str(request.messages[0].get("content", "")):
            return LLMResponse(content="billing", finish_reason="stop")
        return await super().complete(request, on_text=on_text)

    def _cancel(self) -> None:
        try:  # as run_control.cancel writes them, without waking the task's watch
            RobotResult.objects.filter(pk=self.pk).update(status=Status.CANCELLED)
            RobotResult.objects.filter(parent_id=self.pk, status=Status.RUNNING).update(status=Status.CANCELLED)
        finally:
            connections.close_all()


def test_a_distributed_task_that_finishes_as_its_turn_is_cancelled_keeps_its_text_and_ends_the_turn(
        settings: Any, owner: Any, postgres: None) -> None:
    thread = Thread.objects.create(user=owner, robot_name="helpdesk")
    turn = start_run(thread, "helpdesk", "I was charged twice")
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: ClassifyThenCancelled(turn.pk), "EXECUTOR": "sync",
                         "DISTRIBUTED_NETWORKS": True, "CANCEL_POLL_INTERVAL": 60}
    executor.dispatch(turn)
    turn.refresh_from_db()
    billing = RobotResult.objects.get(parent_id=turn.pk, task_name="billing")
    assert (turn.status, billing.status) == (Status.CANCELLED, Status.CANCELLED)
    assert billing.reply == turn.reply == "All done."
    assert _kinds(billing)[-2:] == ["run.cancelled", "stream.ended"]
    assert _kinds(turn)[-2:] == ["run.cancelled", "stream.ended"]


@pytest.mark.django_db(transaction=True)
def test_cancelling_a_turn_sends_its_queued_tasks_events_as_the_turns(
        scripted_llm: Callable[..., FakeLLM], settings: Any, owner: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat page opens a bubble per run id: a queued task row's ``run.cancelled`` under the task's own run id
    (``<turn>.1``) opened a ghost one. Every event that reaches the thread's group is the turn's, and the page's
    ``run.cancelled`` (no ``task``) goes out once."""
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True,
                         "NETWORK_INLINE_TASKS": False}  # the classifier is sent, not run by the turn's job
    scripted_llm()
    sent: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: sent.append(pk))  # the broker
    turn = start_run(Thread.objects.create(user=owner, robot_name="helpdesk"), "helpdesk", "Hello")
    runner.deliver(turn.pk)  # the turn starts and queues its classifier
    [queued] = RobotResult.objects.filter(parent_id=turn.pk)
    assert queued.status == Status.QUEUED and sent == [queued.pk]
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(thread_group(turn.thread_id), channel)

    run_control.cancel(turn, owner)
    queued.refresh_from_db()
    assert queued.status == Status.CANCELLED
    stored = list(RunEvent.objects.filter(thread_id=turn.thread_id).order_by("pk").values_list("pk", flat=True))
    events: list[dict[str, Any]] = []
    while {event["cursor"] for event in events} != set(stored[-4:]):
        events += async_to_sync(asyncio.wait_for)(layer.receive(channel), 5)["events"]
    assert {event["run_id"] for event in events} == {turn.run_id}
    assert [event["kind"] for event in events if not event.get("task")] == ["run.cancelled", "stream.ended"]
    assert sorted(event["kind"] for event in events if event.get("task") == "classifier") == [
        "run.cancelled", "stream.ended"]
