"""The process's step writer (robotlab_django.runs.step_writer): one thread, its connection kept between steps and
closed once they stop coming."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from robotlab_django.runs import step_writer

pytestmark = pytest.mark.django_db(transaction=True)  # the writer's own connection sees committed rows only


def _connection_in_use() -> tuple[int, Any]:
    connection.ensure_connection()
    return threading.get_ident(), connection.connection


def test_the_steps_are_written_by_one_thread_that_keeps_its_connection_until_they_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    first = step_writer.submit(_connection_in_use).result(timeout=10)
    second = step_writer.submit(_connection_in_use).result(timeout=10)
    assert first == second and first[0] != threading.get_ident()  # one thread, one connection for both

    closed = threading.Event()
    real = step_writer.connections

    class Watched:
        def close_all(self) -> None:
            real.close_all()
            closed.set()

    monkeypatch.setattr(step_writer, "connections", Watched())
    monkeypatch.setattr(step_writer, "IDLE", 0.05)
    step_writer.submit(lambda: None).result(timeout=10)  # the writer now waits 0.05 s for the next step
    assert closed.wait(10)  # none came: it closed its connection
    third = step_writer.submit(_connection_in_use).result(timeout=10)
    assert third[0] == first[0]  # the same thread
    if connection.vendor != "sqlite":  # Django keeps a test's in-memory SQLite database open
        assert third[1] is not first[1]  # connected anew


def test_a_write_that_raises_gives_its_error_to_its_run() -> None:
    def fails() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        step_writer.submit(fails).result(timeout=10)
    assert step_writer.submit(lambda: 42).result(timeout=10) == 42  # and the writer goes on
