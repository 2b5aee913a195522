"""The migrations match the models and build the Rails columns and the unique sequence constraint."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection


@pytest.mark.django_db
def test_no_missing_migrations() -> None:
    out = StringIO()
    call_command("makemigrations", "robotlab", "--check", "--dry-run", stdout=out)
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_the_tables_have_the_rails_columns_and_ours() -> None:
    with connection.cursor() as cursor:
        threads = {column.name for column in connection.introspection.get_table_description(cursor,
                                                                                           "robotlab_thread")}
        results = {column.name for column in connection.introspection.get_table_description(
            cursor, "robotlab_robotresult")}
        constraints = connection.introspection.get_constraints(cursor, "robotlab_robotresult")
    assert {"session_id", "initial_input", "input_metadata", "state_data", "last_user_message",
            "last_user_message_at", "created_at", "updated_at", "user_id", "robot_name"} <= threads
    assert {"thread_id", "robot_name", "sequence_number", "output_data", "tool_calls_data", "stop_reason",
            "checksum", "status", "input", "reply", "messages", "model", "input_tokens", "output_tokens", "cost",
            "duration", "error", "error_type", "delegated_by", "run_id", "task_id", "attempts"} <= results
    unique = [spec for spec in constraints.values() if spec["unique"] and spec["columns"] == ["thread_id",
                                                                                              "sequence_number"]]
    assert unique, constraints
