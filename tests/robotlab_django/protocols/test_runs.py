"""Following a run's stored events for the protocol servers: from a given event, and not past a parked run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from robotlab.streaming import STREAM_ENDED, TEXT_DELTA
from robotlab.testing import text
from robotlab_django.abstract_models import Status
from robotlab_django.models import RobotResult, RunEvent
from robotlab_django.protocols import runs
from robotlab_django.runs import executor
from robotlab_django.runs.records import start_run
from robotlab_django.streaming.event_stream import publish_events

pytestmark = pytest.mark.django_db


def _follow(row: Any, after: int = 0) -> list[str]:
    async def follow() -> list[str]:
        events = [event async for event in runs.afollow_events(row, after=after)]
        return [str(event.get("text") or event["kind"]) for event in events]

    # well inside SETTLED_GRACE: following a parked run must not wait for a stream.ended that never comes
    return async_to_sync(asyncio.wait_for)(follow(), runs.SETTLED_GRACE / 2)


def test_a_parked_run_is_followed_to_its_last_event_and_no_further() -> None:
    row = start_run("s1", "echo", "Which plan?")
    publish_events(row, [(TEXT_DELTA, {"text": "Let me ask. "}), ("hitl.requested", {"question": "Which plan?"})])
    RobotResult.objects.filter(pk=row.pk).update(status=Status.AWAITING, question={"question": "Which plan?"})
    assert _follow(row) == ["Let me ask. ", "hitl.requested"]


def test_a_resumed_run_is_followed_from_the_event_given() -> None:
    row = start_run("s1", "echo", "Which plan?")
    publish_events(row, [(TEXT_DELTA, {"text": "Let me ask. "})])
    after = async_to_sync(runs.last_event_pk)(row)
    assert after > 0
    publish_events(row, [(TEXT_DELTA, {"text": "The pro plan it is."}), (STREAM_ENDED, {})])
    assert _follow(row, after) == ["The pro plan it is.", STREAM_ENDED]
    assert _follow(row) == ["Let me ask. ", "The pro plan it is.", STREAM_ENDED]


def test_a_distributed_turn_is_followed_through_its_task_rows_each_in_order(
        scripted_llm: Any, settings: Any) -> None:
    """A distributed network turn stores each task's events on the task's row: following the turn yields them,
    in each row's order, and ends at the turn's own ``stream.ended``, not at a task row's."""
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    scripted_llm(text("billing"), text("Your refund is on its way."))
    row = start_run("s1", "helpdesk", "I was charged twice")
    executor.dispatch(row)
    tasks = RobotResult.objects.filter(parent_id=row.pk).order_by("pk")
    assert [t.task_name for t in tasks] == ["classifier", "billing"]
    # a task row's own stream.ended (as a stopped task stores) does not end the turn's
    publish_events(tasks[0], [(STREAM_ENDED, {"task": "classifier"})])

    async def follow() -> list[dict[str, Any]]:
        return [event async for event in runs.afollow_events(row)]

    events = async_to_sync(asyncio.wait_for)(follow(), runs.SETTLED_GRACE / 2)
    deltas = [(e["task"], e["text"]) for e in events if e["kind"] == TEXT_DELTA]
    assert "".join(text for task, text in deltas if task == "classifier") == "billing"
    assert "".join(text for task, text in deltas if task == "billing") == "Your refund is on its way."
    assert [e["kind"] for e in events if e["result_id"] == row.pk][-2:] == ["run.completed", STREAM_ENDED]
    assert events[-1]["result_id"] == row.pk and events[-1]["kind"] == STREAM_ENDED
    for pk in {e["result_id"] for e in events}:
        cursors = [e["cursor"] for e in events if e["result_id"] == pk]
        assert cursors == sorted(cursors)
    newest = RunEvent.objects.filter(thread_id=row.thread_id).order_by("-pk").values_list("pk", flat=True)[0]
    assert async_to_sync(runs.last_event_pk)(row) == newest  # the task row's late event included
