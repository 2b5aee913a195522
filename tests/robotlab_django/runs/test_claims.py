"""Admitting a delivered run: its row read once, with what the job reads next."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from robotlab_django import services
from robotlab_django.models import RobotResult
from robotlab_django.runs import claims

pytestmark = pytest.mark.django_db


def test_admit_reads_the_row_with_its_turn_and_thread_in_one_statement_without_ordering() -> None:
    """Issue 31: compiling the model's ``ordering`` doubled the CPU of the one statement every job sends."""
    turn = services.start_run("claims", "echo", "Hi")
    task = RobotResult.objects.create(thread_id=turn.thread_id, parent=turn, robot_name="echo", run_id="t.1",
                                      sequence_number=turn.sequence_number + 1)
    with CaptureQueriesContext(connection) as queries:
        row, skipped = claims.admit(task.pk)
        assert row is not None and not skipped
        assert (row.parent, row.thread.pk) == (turn, turn.thread_id)  # cached by the same statement
    assert len(queries) == 1
    sql = queries[0]["sql"]
    assert "JOIN" in sql and "ORDER BY" not in sql


def test_admit_drops_a_row_that_is_gone() -> None:
    assert claims.admit(10**9) == (None, True)
