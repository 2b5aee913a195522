"""Checkpointed steps: a run executed again replays its completed LLM and tool calls from the database.

A first execution is cut short the way a lost worker leaves it (the model fails at a later step, and
the row is set ``retrying`` as :func:`robotlab_django.runs.runner.deliver` does for a retry), then run
again. The tests use ``transaction=True``: steps are stored on their own connection, and a run
inside a transaction is not checkpointed.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connections, transaction
from django.utils import timezone

import robotlab
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, RunStep, Status, Thread
from robotlab_django.privacy.retention import prune_threads
from robotlab_django.registry import registry
from robotlab_django.runs.checkpoints import llm_fingerprint

pytestmark = pytest.mark.django_db(transaction=True)


class Killed(RuntimeError):
    """Stands for the worker dying at this step."""


@pytest.fixture
def notes(clean_registry: None) -> list[str]:
    """The notes the ``notary`` robot's tool wrote (a side effect that must not happen twice)."""
    written: list[str] = []

    def write_note(note: str) -> dict[str, Any]:
        """Write a note down.

        Args:
            note: What to write.
        """
        written.append(note)
        return {"written": note, "count": len(written)}

    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="notary", system_prompt="You write notes.", local_tools=[write_note], **options)

    registry.register(build, name="notary", replace=True)
    return written


def _cut_short(scripted_llm: Callable[..., FakeLLM], *steps: Any) -> tuple[RobotResult, FakeLLM]:
    """A run whose first execution ends at ``Killed``, set ``retrying`` for its next execution."""
    llm = scripted_llm(*steps)
    row = services.run_robot("s-steps", "notary", "Note milk", raise_errors=False)
    assert row.status == Status.FAILED and row.error_type == "Killed"
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RETRYING)
    return row, llm


def test_a_second_execution_replays_the_completed_steps_and_issues_only_the_one_in_flight(
        scripted_llm: Callable[..., FakeLLM], notes: list[str]) -> None:
    row, first = _cut_short(scripted_llm, tool_call("write_note", note="milk", usage=(5, 2)), raise_(Killed("-9")))
    assert list(RunStep.objects.filter(result=row).values_list("idx", "kind")) == [(0, "llm"), (1, "tool")]
    assert len(first.requests) == 2 and notes == ["milk"]

    again = scripted_llm(text("Noted: milk.", usage=(9, 3)))
    events: list[Any] = []
    done = services.execute_run(row.pk, on_event=events.append)
    assert done.status == Status.COMPLETED and done.attempts == 2 and done.reply == "Noted: milk."
    assert len(again.requests) == 1  # the step in flight; the completed LLM call was not sent again
    assert notes == ["milk"]  # the tool did not run again
    assert again.requests[0].messages[-1] == {"role": "tool", "tool_call_id": first.requests[1].messages[-1][
        "tool_call_id"], "name": "write_note", "content": '{"written": "milk", "count": 1}'}
    assert again.requests[0].messages == first.requests[1].messages  # the same request as the killed one
    assert (done.input_tokens, done.output_tokens) == (14, 5)  # the replayed call counts once
    kinds = [event.kind for event in events]
    assert kinds.count("tool_call.started") == kinds.count("tool_call.completed") == 1  # the stream shows it
    assert list(RunStep.objects.filter(result=row).values_list("idx", "kind")) == [(0, "llm"), (1, "tool"),
                                                                                  (2, "llm")]


async def test_the_async_execution_replays_the_completed_steps_too(scripted_llm: Callable[..., FakeLLM],
                                                                    notes: list[str]) -> None:
    from asgiref.sync import sync_to_async

    row, _first = await sync_to_async(_cut_short)(scripted_llm, tool_call("write_note", note="milk"),
                                                  raise_(Killed("-9")))
    again = scripted_llm(text("Noted: milk."))
    try:
        done = await services.aexecute_run(row.pk)
    finally:
        await sync_to_async(connections.close_all)()  # the database thread's connection
    assert (done.status, done.reply, len(again.requests), notes) == (Status.COMPLETED, "Noted: milk.", 1, ["milk"])


def test_a_replayed_reply_goes_through_the_stream_once(scripted_llm: Callable[..., FakeLLM],
                                                        notes: list[str]) -> None:
    llm = scripted_llm(text("All done."))
    row = services.run_robot("s-steps", "notary", "Note milk")
    assert row.reply == "All done." and len(llm.requests) == 1
    # the worker died after the last step was stored, before the row was: every step replays
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RETRYING, reply="")
    idle = scripted_llm()
    deltas: list[str] = []
    done = services.execute_run(row.pk, on_event=lambda event: deltas.append(event.data.get("text", ""))
                                if event.kind == "text.delta" else None)
    assert idle.requests == [] and done.reply == "All done." and "".join(deltas) == "All done."


def test_a_changed_request_is_issued_again_and_replaces_the_stale_steps(
        scripted_llm: Callable[..., FakeLLM], notes: list[str], caplog: pytest.LogCaptureFixture) -> None:
    row, first = _cut_short(scripted_llm, tool_call("write_note", note="milk"), raise_(Killed("-9")))
    stale = list(RunStep.objects.filter(result=row).values_list("fingerprint", flat=True))
    RobotResult.objects.filter(pk=row.pk).update(input="Note eggs")  # the run's request is not the same now

    again = scripted_llm(tool_call("write_note", note="eggs"), text("Noted: eggs."))
    with caplog.at_level(logging.WARNING, logger="robotlab_django"):
        done = services.execute_run(row.pk)
    assert done.reply == "Noted: eggs." and len(again.requests) == 2
    assert notes == ["milk", "eggs"]  # after the divergence the tool runs again, with its new arguments
    assert "diverged from its checkpoints at step 0" in caplog.text
    steps = list(RunStep.objects.filter(result=row).order_by("idx"))
    assert [step.idx for step in steps] == [0, 1, 2]
    assert steps[0].fingerprint == llm_fingerprint(again.requests[0]) != stale[0]
    assert steps[1].output == {"json": '{"written": "eggs", "count": 2}'}  # as text: jsonb reorders keys


def test_no_steps_are_stored_when_checkpoints_are_off_or_the_run_is_inside_a_transaction(
        scripted_llm: Callable[..., FakeLLM], notes: list[str], settings: Any) -> None:
    scripted_llm(tool_call("write_note", note="milk"), text("Noted."), tool_call("write_note", note="tea"),
                 text("Noted."))
    with transaction.atomic():
        inside = services.run_robot("s-steps", "notary", "Note milk")
    settings.ROBOTLAB = {**settings.ROBOTLAB, "CHECKPOINT_STEPS": False}
    off = services.run_robot("s-steps", "notary", "Note tea")
    assert inside.status == off.status == Status.COMPLETED and notes == ["milk", "tea"]
    assert RunStep.objects.count() == 0


def test_steps_are_kept_with_a_finished_run_and_deleted_with_its_thread(
        scripted_llm: Callable[..., FakeLLM], notes: list[str]) -> None:
    scripted_llm(tool_call("write_note", note="milk"), text("Noted."))
    row = services.run_robot("s-steps", "notary", "Note milk")
    assert row.steps.count() == 3
    Thread.objects.filter(pk=row.thread_id).update(updated_at=timezone.now() - dt.timedelta(days=100))
    prune_threads(dt.timedelta(days=90))
    assert RunStep.objects.count() == 0


def test_a_first_execution_reads_no_steps_and_a_later_one_does(notes: list[str]) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from robotlab_django.runs import checkpoints
    from robotlab_django.runs.records import start_run

    row = start_run("s-first", "notary", "Note milk")
    robot = robotlab.build(name="notary", model="fake/model")
    for attempts, parked, reads in ((1, None, 0), (2, None, 1), (1, timezone.now(), 1)):
        row.attempts, row.parked_at = attempts, parked  # claimed once; twice; once since an answer
        with CaptureQueriesContext(connection) as queries:
            assert checkpoints.attach(robot, row) is not None
        assert sum("robotlab_runstep" in q["sql"] for q in queries.captured_queries) == reads
