"""One batch written per INSERT, and on SQLite one writer at a time (robotlab_django.streaming.inserts)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections

from robotlab.streaming import Event
from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.models import RunEvent
from robotlab_django.streaming import event_stream


def _delta(seq: int, piece: str, run_id: str) -> Event:
    return Event(kind="text.delta", run_id=run_id, seq=seq, ts=float(seq), data={"text": piece})


@pytest.mark.django_db(transaction=True)
def test_batches_stored_from_many_threads_at_once_take_turns_on_sqlite(caplog: Any) -> None:
    if connections["default"].vendor != "sqlite":
        pytest.skip("one writer at a time is SQLite's; PostgreSQL takes the inserts together")
    row = services.run_robot("s-many", "echo", "hi", llm=FakeLLM([text("one")]))
    start, failures = threading.Barrier(8), []

    def write(worker: int) -> None:  # a streaming run's thread: its batches one after another
        try:
            start.wait(10)
            for batch in range(25):
                event_stream._persist(row.thread_id, row.pk, [_delta(batch + 1, "x", run_id=f"t{worker}")])
        except Exception as exc:  # pragma: no cover - reported by the assertion below
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(worker,), name=f"writer-{worker}") for worker in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    # no batch of these threads found the database locked (SQLite's shared test database refuses a locked table
    # at once, where a file database sleeps in its busy handler): each waited its turn in this process instead
    assert [r.getMessage() for r in caplog.records
            if r.threadName.startswith("writer-") and "retrying" in r.getMessage()] == []
    assert RunEvent.objects.filter(run_id__startswith="t").count() == 200
