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
from django.contrib.auth import get_user_model
from django.utils import timezone

import robotlab
from robotlab.llm.types import LLMRequest, LLMResponse
from robotlab.testing import FakeLLM, text, tool_call
from robotlab.tools import AskUser
from robotlab_django import run_control, services
from robotlab_django.models import RobotResult, RunEvent, RunStep, Status, Thread
from robotlab_django.records import start_run
from robotlab_django.registry import registry

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
        settings: Any, planner: None, owner: Any) -> None:
    llm = SlowLLM()
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
    thread = Thread.objects.create(user=owner, robot_name="planner")
    row = start_run(thread, "planner", "Write a lot")
    worker = threading.Thread(target=services.execute_run, args=(row.pk,), kwargs={"raise_errors": False})
    worker.start()
    assert llm.sent.wait(10)
    while not RunEvent.objects.filter(result_id=row.pk, kind="text.delta").exists():
        assert worker.is_alive()
        llm.sent.wait(0.05)
    asked = time.monotonic()
    run_control.cancel(row, owner)
    worker.join(5)
    stopped = time.monotonic() - asked
    assert not worker.is_alive() and stopped < 1.0
    row.refresh_from_db()
    assert row.status == Status.CANCELLED
    assert row.reply.startswith("w0 w1 ") and len(row.reply.split()) < llm.chunks
    assert _kinds(row)[-2:] == ["run.cancelled", "stream.ended"]
