"""Following a run's stored events for the protocol servers: from a given event, and not past a parked run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from robotlab.streaming import STREAM_ENDED, TEXT_DELTA
from robotlab_django import protocol_runs
from robotlab_django.abstract_models import Status
from robotlab_django.event_stream import publish_events
from robotlab_django.models import RobotResult
from robotlab_django.records import start_run

pytestmark = pytest.mark.django_db


def _follow(row: Any, after: int = 0) -> list[str]:
    async def follow() -> list[str]:
        events = [event async for event in protocol_runs.afollow_events(row, after=after)]
        return [str(event.get("text") or event["kind"]) for event in events]

    # well inside SETTLED_GRACE: following a parked run must not wait for a stream.ended that never comes
    return async_to_sync(asyncio.wait_for)(follow(), protocol_runs.SETTLED_GRACE / 2)


def test_a_parked_run_is_followed_to_its_last_event_and_no_further() -> None:
    row = start_run("s1", "echo", "Which plan?")
    publish_events(row, [(TEXT_DELTA, {"text": "Let me ask. "}), ("hitl.requested", {"question": "Which plan?"})])
    RobotResult.objects.filter(pk=row.pk).update(status=Status.AWAITING, question={"question": "Which plan?"})
    assert _follow(row) == ["Let me ask. ", "hitl.requested"]


def test_a_resumed_run_is_followed_from_the_event_given() -> None:
    row = start_run("s1", "echo", "Which plan?")
    publish_events(row, [(TEXT_DELTA, {"text": "Let me ask. "})])
    after = async_to_sync(protocol_runs.last_event_pk)(row)
    assert after > 0
    publish_events(row, [(TEXT_DELTA, {"text": "The pro plan it is."}), (STREAM_ENDED, {})])
    assert _follow(row, after) == ["The pro plan it is.", STREAM_ENDED]
    assert _follow(row) == ["Let me ask. ", "The pro plan it is.", STREAM_ENDED]
