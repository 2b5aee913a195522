"""Retention: ages, pruning old threads with everything they own, the command."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from robotlab_django.models import RobotResult, RunEvent, Thread
from robotlab_django.privacy.retention import parse_age, prune_threads


@pytest.mark.parametrize(("text", "age"), [
    ("90d", dt.timedelta(days=90)), ("12h", dt.timedelta(hours=12)), ("30m", dt.timedelta(minutes=30)),
    ("2w", dt.timedelta(weeks=2)), ("45s", dt.timedelta(seconds=45)), ("7", dt.timedelta(days=7)),
    (" 3D ", dt.timedelta(days=3)),
])
def test_parse_age(text: str, age: dt.timedelta) -> None:
    assert parse_age(text) == age


@pytest.mark.parametrize("text", ["", "ninety days", "-5d", "0d", "5y", "1.5d"])
def test_parse_age_refuses_anything_else(text: str) -> None:
    with pytest.raises(ValueError):
        parse_age(text)


def _thread(session: str, days_old: int) -> Thread:
    thread = Thread.objects.create(session_id=session)
    row = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="echo")
    RunEvent.objects.create(thread=thread, result=row, run_id=row.run_id, seq=1, kind="run.started", ts=0)
    Thread.objects.filter(pk=thread.pk).update(updated_at=timezone.now() - dt.timedelta(days=days_old))
    return thread


@pytest.mark.django_db
def test_prune_deletes_old_threads_with_their_results_and_events() -> None:
    _thread("old", 100)
    _thread("older", 400)
    _thread("recent", 5)
    dry = prune_threads(dt.timedelta(days=90), dry_run=True)
    assert (dry.threads, dry.results, dry.events, dry.dry_run) == (2, 2, 2, True)
    assert Thread.objects.count() == 3
    report = prune_threads(dt.timedelta(days=90), batch_size=1)
    assert (report.threads, report.results, report.events) == (2, 2, 2)
    assert list(Thread.objects.values_list("session_id", flat=True)) == ["recent"]
    assert (RobotResult.objects.count(), RunEvent.objects.count()) == (1, 1)
    with pytest.raises(ValueError):
        prune_threads(dt.timedelta(0))


@pytest.mark.django_db
def test_prune_command(capsys: pytest.CaptureFixture[str], settings: Any) -> None:
    _thread("old", 100)
    call_command("robotlab_prune", "--older-than", "90d", "--dry-run")
    assert "Would delete 1 thread(s), 1 result(s) and 1 event(s)" in capsys.readouterr().out
    assert Thread.objects.count() == 1
    settings.ROBOTLAB = {**settings.ROBOTLAB, "RETENTION_DAYS": 30}
    call_command("robotlab_prune")
    assert "Deleted 1 thread(s)" in capsys.readouterr().out
    assert Thread.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(("args", "message"), [
    ([], "Give --older-than"), (["--older-than", "soon"], "is not an age"),
    (["--older-than", "1d", "--batch-size", "0"], "--batch-size"),
])
def test_prune_command_bad_input(args: list[str], message: str) -> None:
    _thread("old", 100)
    with pytest.raises(CommandError, match=message):
        call_command("robotlab_prune", *args)
    assert Thread.objects.count() == 1
