"""A job of a distributed turn runs the one task it leaves ready itself (``ROBOTLAB["NETWORK_INLINE_TASKS"]``).

The jobs are called here as a Celery worker calls them (:func:`robotlab_django.runs.runner.deliver`), the broker
replaced by a list of the messages sent, so each test sees which tasks went through the broker and which ran in the
job that made them ready, and that a task run that way keeps the exactly-once rules of a sent one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError

from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django.models import RobotResult, Status
from robotlab_django.networks import advance, inline
from robotlab_django.runs import executor, runner
from robotlab_django.runs.records import current_worker, start_run

pytestmark = pytest.mark.django_db(transaction=True)  # the messages go when the transaction commits

Script = Callable[..., FakeLLM]


@pytest.fixture
def sent(settings: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The Celery executor with its broker replaced by this list of the rows sent."""
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True,
                         "NETWORKS": {"fanout": "tests.robotlab_django.fanout.fanout_network"}}
    monkeypatch.setenv("ROBOTLAB_TEST_FANOUT", "4")
    messages: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: messages.append(pk))
    return messages


def task_rows(turn: Any) -> dict[str, Any]:
    return {row.task_name: row for row in RobotResult.objects.filter(parent_id=turn.pk).order_by("pk")}


def queue_turn(network: str, message: str) -> Any:
    turn = start_run("s1", network, message)
    executor.dispatch(turn)  # its message is sent: the row has its Celery task id
    turn.refresh_from_db()
    return turn


def fan_out_script(scripted_llm: Script) -> FakeLLM:
    branches = [step for i in range(1, 5) for step in (tool_call("note", text=f"b{i}"), text(f"part {i}"))]
    return scripted_llm(text("four parts"), *branches, text("all parts joined"))


def test_the_turns_job_runs_its_first_task_and_the_last_branchs_job_runs_the_reducer(
        scripted_llm: Script, sent: list[Any]) -> None:
    llm = fan_out_script(scripted_llm)
    turn = queue_turn("fanout", "Split it")
    runner.deliver(sent.pop())  # the turn's job: run.started, then the plan, run here
    rows = task_rows(turn)
    assert rows["plan"].status == Status.COMPLETED and rows["plan"].worker_pid == os.getpid()
    assert rows["plan"].task_id == turn.task_id  # the turn's message ran it
    branches = [rows[f"branch_{i}"] for i in range(1, 5)]
    assert sorted(sent) == sorted(row.pk for row in branches)  # the four parallel branches: one message each
    for row in branches:
        runner.deliver(row.pk)
    rows = task_rows(turn)
    assert rows["reduce"].status == Status.COMPLETED and rows["reduce"].task_id == branches[-1].task_id
    assert len(sent) == 4  # the reducer went through no broker: the job of the last branch to finish ran it
    turn.refresh_from_db()
    assert (turn.status, turn.reply) == (Status.COMPLETED, "all parts joined")
    assert {row.attempts for row in rows.values()} == {1} and len(llm.requests) == 1 + 8 + 1
    assert rows["reduce"].input == "part 4"  # the reducer saw what it sees when it is sent


def test_every_task_is_sent_when_inline_tasks_are_off(scripted_llm: Script, sent: list[Any], settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "NETWORK_INLINE_TASKS": False}
    fan_out_script(scripted_llm)
    turn = queue_turn("fanout", "Split it")
    while sent:
        runner.deliver(sent.pop(0))
    turn.refresh_from_db()
    assert turn.status == Status.COMPLETED
    rows = task_rows(turn)
    assert len({row.task_id for row in rows.values()}) == 6  # each task had a message of its own


def test_a_chain_runs_in_the_turns_job_and_a_duplicate_delivery_of_its_task_does_nothing(
        scripted_llm: Script, sent: list[Any]) -> None:
    llm = scripted_llm(text("billing"), text("Your refund is on its way."))
    turn = queue_turn("helpdesk", "I was charged twice")
    runner.deliver(sent.pop())  # the classifier, then billing, which it routes to: one job
    assert sent == []
    turn.refresh_from_db()
    assert (turn.status, turn.reply) == (Status.COMPLETED, "Your refund is on its way.")
    rows = task_rows(turn)
    assert [(name, row.status, row.attempts) for name, row in rows.items()] == [
        ("classifier", Status.COMPLETED, 1), ("billing", Status.COMPLETED, 1)]
    outcome = runner.deliver(rows["billing"].pk)  # a resend of it, however it came
    assert outcome["skipped"] is True and len(llm.requests) == 2
    outcome = runner.deliver(turn.pk, redelivered=True)  # the turn's message delivered again
    assert outcome["status"] == Status.COMPLETED and len(llm.requests) == 2 and sent == []


def test_a_task_the_job_ran_itself_is_run_again_by_the_jobs_retry_from_its_checkpoint(
        scripted_llm: Script, sent: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The billing task, run by the turn's job, answered; storing it hit a locked database, so the job failed.

    Nothing of billing's outcome is stored: its row is still running, claimed by the job that is over. Celery's
    retry of the turn's message takes the row over as its own and runs billing again: its model call comes from
    the checkpoint, not from the model.
    """
    llm = scripted_llm(text("billing"), text("Your refund is on its way."))
    turn = queue_turn("helpdesk", "I was charged twice")
    commit, refused = advance._commit, []

    def locked_once(*args: Any) -> Any:
        outcome = args[-1] if len(args) > 6 else None
        if outcome is not None and outcome[0].task_name == "billing" and not refused:
            refused.append(outcome[0].pk)
            raise OperationalError("database is locked")
        return commit(*args)

    monkeypatch.setattr(advance, "_commit", locked_once)
    message = sent.pop()
    with pytest.raises(OperationalError, match="database is locked"):
        runner.deliver(message)
    billing = task_rows(turn)["billing"]
    assert refused == [billing.pk] and (billing.status, billing.task_id) == (Status.RUNNING, turn.task_id)
    assert inline.rows_of_message(RobotResult.objects.get(pk=turn.pk)) == [billing.pk]

    runner.deliver(message, retried=True)  # Celery's retry of the turn's job
    turn.refresh_from_db()
    assert (turn.status, turn.reply) == (Status.COMPLETED, "Your refund is on its way.")
    billing.refresh_from_db()
    assert (billing.status, billing.attempts) == (Status.COMPLETED, 2)
    assert len(llm.requests) == 2 and sent == []  # billing's call came from its checkpoint


def test_the_worker_releases_the_rows_its_lost_job_ran_itself(scripted_llm: Script, sent: list[Any]) -> None:
    scripted_llm(text("billing"), text("Done."))
    turn = queue_turn("helpdesk", "Refund please")
    runner.deliver(sent.pop())
    billing = task_rows(turn)["billing"]
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()  # the pool child that ran it died
    RobotResult.objects.filter(pk=billing.pk).update(status=Status.RUNNING, worker=current_worker()[0],
                                                     worker_pid=child.pid)
    assert inline.release_rows_of_message("another-message", current_worker()[0]) == []
    assert inline.release_rows_of_message(turn.task_id, "another-host") == []  # a live claim elsewhere: its lease
    assert inline.release_rows_of_message(turn.task_id, current_worker()[0]) == [billing.pk]
    assert RobotResult.objects.get(pk=billing.pk).status == Status.RETRYING
