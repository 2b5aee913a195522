"""Distributed network turns in one process: the ``sync`` executor runs every job (the turn's start and each
task) at once, in turn, through the same rows, claims and turn state a Celery worker uses.

The real workers are in test_network_workers.py; here the jobs are called directly, so the exactly-once
rules (a duplicate delivery, a stale advance, a task out of attempts) are checked one step at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError

from robotlab.network import TurnState
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django import executor, network_turns, runner
from robotlab_django.chat_history import load_history
from robotlab_django.models import RobotResult, RunEvent, Status
from robotlab_django.records import start_run
from robotlab_django.runnables import build_network
from robotlab_django.sync_bridge import call_sync
from robotlab_django.turn_graph import task_boxes, turn_graph

pytestmark = pytest.mark.django_db

Script = Callable[..., FakeLLM]


@pytest.fixture
def distributed(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True,
                         "NETWORKS": {"fanout": "tests.robotlab_django.fanout.fanout_network"}}


def dispatched(thread: str, network: str, message: str) -> Any:
    row = start_run(thread, network, message)
    executor.dispatch(row)
    row.refresh_from_db()
    return row


def task_rows(turn: Any) -> list[Any]:
    return list(RobotResult.objects.filter(parent_id=turn.pk).order_by("pk"))


def test_a_distributed_turn_stores_a_row_per_task_and_matches_a_one_process_turn(
        scripted_llm: Script, distributed: None) -> None:
    scripted_llm(text("billing", usage=(10, 1)), text("Your refund is on its way.", usage=(20, 5), cost=0.25))
    single = runner.run_robot("one", "helpdesk", "I was charged twice")  # run_robot runs here, in one process
    llm = scripted_llm(text("billing", usage=(10, 1)), text("Your refund is on its way.", usage=(20, 5), cost=0.25))
    turn = dispatched("many", "helpdesk", "I was charged twice")

    assert (turn.status, turn.reply, turn.messages) == (single.status, single.reply, single.messages)
    assert load_history(turn.thread_id) == load_history(single.thread_id)
    assert (turn.input_tokens, turn.output_tokens, float(turn.cost)) == (0, 0, 0.0)  # usage is on the task rows
    rows = task_rows(turn)
    assert [(r.task_name, r.robot_name, r.status, r.delegated_by, r.attempts) for r in rows] == [
        ("classifier", "classifier", Status.COMPLETED, "helpdesk", 1),
        ("billing", "billing_agent", Status.COMPLETED, "helpdesk", 1)]
    assert [(r.input, r.reply) for r in rows] == [("I was charged twice", "billing"),
                                                  ("I was charged twice", "Your refund is on its way.")]
    assert [(r.input_tokens, r.output_tokens, float(r.cost)) for r in rows] == [(10, 1, 0.0), (20, 5, 0.25)]
    assert all(r.worker and r.worker_pid == os.getpid() and r.started_at and r.finished_at for r in rows)
    assert [r.run_id for r in rows] == [f"{turn.run_id}.1", f"{turn.run_id}.2"]
    in_process = task_rows(single)  # the one-process turn fills the same columns
    assert [(r.task_name, r.robot_name, r.worker_pid) for r in in_process] == [
        ("classifier", "classifier", os.getpid()), ("billing", "billing_agent", os.getpid())]
    state = TurnState.from_dict(turn.turn_state)
    assert state.is_done and state.status == {"classifier": "completed", "billing": "completed",
                                              "technical": "skipped", "general": "skipped"}
    assert len(llm.requests) == 2 and "billing specialist" in llm.requests[1].messages[0]["content"]


def test_the_events_of_every_task_carry_the_turn_run_id_in_per_task_order(
        scripted_llm: Script, distributed: None) -> None:
    scripted_llm(text("technical"), text("Restart the app."))
    turn = dispatched("s1", "helpdesk", "The app crashes")
    events = list(RunEvent.objects.filter(thread_id=turn.thread_id).order_by("pk"))
    assert {e.run_id for e in events} == {turn.run_id}
    assert len({(e.run_id, e.seq) for e in events}) == len(events)
    own = [e.kind for e in events if e.result_id == turn.pk]
    assert own == ["run.started", "run.completed", "stream.ended"]
    completed = next(e for e in events if e.kind == "run.completed")
    assert completed.data == {"network": "helpdesk", "reply": "Restart the app.",
                              "tasks": ["classifier", "technical"]}
    for row in task_rows(turn):
        mine = [e for e in events if e.result_id == row.pk]
        kinds = [e.kind for e in mine]
        assert kinds[0] == "step.started" and kinds[-1] == "step.completed" and "run.started" not in kinds
        assert [e.seq for e in mine] == sorted(e.seq for e in mine)
        assert all(e.data["task"] == row.task_name and e.data["robot"] == row.robot_name for e in mine)
    streamed = "".join(e.data["text"] for e in events if e.kind == "text.delta" and e.data["task"] == "technical")
    assert streamed == turn.reply


def test_a_fan_out_runs_each_branch_once_and_the_reducer_gets_every_branch(
        scripted_llm: Script, distributed: None) -> None:
    branch_steps = [step for i in range(1, 5) for step in (tool_call("note", text=f"b{i}"), text(f"part {i}"))]
    llm = scripted_llm(text("four parts"), *branch_steps, text("all parts joined"))
    turn = dispatched("fan", "fanout", "Split it")
    assert (turn.status, turn.reply) == (Status.COMPLETED, "all parts joined")
    rows = {r.task_name: r for r in task_rows(turn)}
    assert sorted(rows) == ["branch_1", "branch_2", "branch_3", "branch_4", "plan", "reduce"]
    assert {r.status for r in rows.values()} == {Status.COMPLETED} and {r.attempts for r in rows.values()} == {1}
    assert len(llm.requests) == 1 + 8 + 1
    assert rows["reduce"].input == "part 4"  # the last dependency's reply is the reducer's message
    reduced = TurnState.from_dict(turn.turn_state).results["reduce"]
    assert {f"branch_{i}_bot" for i in range(1, 5)} <= set(reduced.context)  # and it saw every branch's result
    boxes = {box.name: box for box in task_boxes(turn)}
    assert boxes["reduce"].depth == 2 and sorted(boxes["reduce"].parents) == [f"branch_{i}" for i in range(1, 5)]
    picture = str(turn_graph(turn))
    assert picture.startswith("<svg") and picture.count("<rect") == 6 and picture.count("<line") == 8


def test_a_failing_final_robot_and_a_routing_error_fail_the_turn(scripted_llm: Script, distributed: None) -> None:
    scripted_llm(text("general"), raise_(RuntimeError("model <b>down</b>")))
    turn = dispatched("s1", "helpdesk", "Hello")
    assert (turn.status, turn.error_type, turn.error) == (Status.FAILED, "RuntimeError", "model <b>down</b>")
    assert [(r.task_name, r.status) for r in task_rows(turn)] == [("classifier", Status.COMPLETED),
                                                                 ("general", Status.FAILED)]
    assert load_history(turn.thread_id) == []

    scripted_llm(text("nowhere"))
    lost = dispatched("s2", "helpdesk", "Hi")
    assert (lost.status, lost.error_type) == (Status.FAILED, "ConfigurationError")
    assert "activated unknown task 'nowhere'" in lost.error
    kinds = [e.kind for e in RunEvent.objects.filter(result_id=lost.pk).order_by("pk")]
    assert kinds == ["run.started", "run.failed", "stream.ended"]


def test_a_redelivered_task_message_and_a_stale_advance_change_nothing(
        scripted_llm: Script, distributed: None) -> None:
    llm = scripted_llm(text("billing"), text("Done."))
    turn = dispatched("s1", "helpdesk", "Refund please")
    first = task_rows(turn)[0]
    outcome = runner.deliver(first.pk)
    assert outcome["skipped"] is True and outcome["status"] == Status.COMPLETED
    assert runner.deliver(turn.pk)["skipped"] is True
    turn_after = RobotResult.objects.get(pk=turn.pk)
    assert turn_after.turn_version == turn.turn_version and len(llm.requests) == 2
    assert len(task_rows(turn)) == 2

    network = build_network("helpdesk")
    state = TurnState.from_dict(turn.turn_state)
    assert call_sync(network_turns.aadvance, turn_after, network, "classifier",
                     result=state.results["classifier"]) == []  # the turn is over: nothing happens
    # a change read at an older version is refused whole: another worker changed the turn first
    assert network_turns._commit(turn_after, turn.turn_version - 1, state, ["technical"], network, None) is None
    assert RobotResult.objects.get(pk=turn.pk).turn_version == turn.turn_version and len(task_rows(turn)) == 2


def test_a_task_out_of_attempts_fails_the_turn_naming_the_task(scripted_llm: Script, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread", "DISTRIBUTED_NETWORKS": True}
    scripted_llm(text("billing"))
    turn = start_run("s1", "helpdesk", "Refund please")
    runner.deliver(turn.pk)  # the turn starts; its first task is queued (the thread executor waits for a commit)
    [task] = task_rows(turn)
    assert (task.task_name, task.status) == ("classifier", Status.QUEUED)
    RobotResult.objects.filter(pk=task.pk).update(status=Status.RUNNING, attempts=3)  # its worker died 3 times
    outcome = runner.deliver(task.pk, retried=True)
    assert outcome["skipped"] is True
    turn.refresh_from_db()
    assert (turn.status, turn.error_type) == (Status.FAILED, "AttemptsExhausted")
    assert turn.error.startswith("Task 'classifier' of network 'helpdesk' failed: gave up after 3 attempts")
    assert [e.kind for e in RunEvent.objects.filter(result_id=turn.pk).order_by("pk")][-2:] == [
        "run.failed", "stream.ended"]


def test_the_admin_graph_escapes_names(scripted_llm: Script, distributed: None) -> None:
    scripted_llm(text("billing"), text("ok"))
    turn = dispatched("s1", "helpdesk", "Hi")
    RobotResult.objects.filter(parent_id=turn.pk, task_name="billing").update(worker="<script>x</script>")
    picture = str(turn_graph(RobotResult.objects.get(pk=turn.pk)))
    assert "<script>" not in picture and "&lt;script&gt;x&lt;/script&gt;" in picture
    assert picture.count("#e2e3e5") == 2  # technical and general: skipped


def test_the_admin_page_of_a_turn_draws_its_task_graph(admin_client: Any, scripted_llm: Script,
                                                       distributed: None) -> None:
    from django.urls import reverse

    scripted_llm(text("billing"), text("<img src=x onerror=alert(1)>"))
    turn = dispatched("s1", "helpdesk", "Hi")
    RobotResult.objects.filter(parent_id=turn.pk).update(worker="w1@<b>host</b>")
    page = admin_client.get(reverse("admin:robotlab_robotresult_change", args=[turn.pk])).content.decode()
    assert '<svg class="robotlab-graph"' in page and page.count('class="robotlab-task') == 4
    assert "w1@&lt;b&gt;host&lt;/b&gt;" in page and "<b>host</b>" not in page
    assert "<img src=x onerror" not in page  # the model's reply is escaped wherever it shows
    task = task_rows(turn)[0]
    assert '<svg class="robotlab-graph"' not in admin_client.get(
        reverse("admin:robotlab_robotresult_change", args=[task.pk])).content.decode()  # a task row has no graph


@pytest.mark.django_db(transaction=True)
def test_a_dispatch_cut_short_by_the_database_is_finished_by_the_jobs_retry(
        scripted_llm: Script, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's job queued four branches, and sending one of them hit a locked database.

    The others still go, and the job fails, so Celery retries it. The retry finds the plan done and sends the
    row left unsent. Before, the turn waited for ``robotlab_requeue_stuck``: a benchmark turn on two SQLite
    workers hung with three branches queued and never sent.
    """
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True,
                         "NETWORKS": {"fanout": "tests.robotlab_django.fanout.fanout_network"}}
    monkeypatch.setenv("ROBOTLAB_TEST_FANOUT", "4")
    scripted_llm(text("four parts"))
    sent: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: sent.append(pk))  # the broker
    turn = start_run("fan", "fanout", "Split it")
    runner.deliver(turn.pk)  # the turn begins: its plan is queued and sent
    [plan] = task_rows(turn)
    assert sent == [plan.pk]
    enqueue, refused = executor.enqueue, []

    def locked_once(result: Any, *, queue: str | None = None) -> str:
        if len(sent) == 2 and not refused:  # the second branch
            refused.append(getattr(result, "pk", result))
            raise OperationalError("database is locked")
        return enqueue(result, queue=queue)

    monkeypatch.setattr(executor, "enqueue", locked_once)
    with pytest.raises(OperationalError, match="database is locked"):
        runner.deliver(plan.pk)
    branches = [row for row in task_rows(turn) if row.task_name.startswith("branch_")]
    assert len(branches) == 4 and len(refused) == 1
    assert sorted(sent[1:]) == sorted(row.pk for row in branches if row.pk not in refused)  # the others went
    assert RobotResult.objects.get(pk=refused[0]).task_id == ""

    outcome = runner.deliver(plan.pk, retried=True)  # Celery's retry of the plan's job
    assert outcome["skipped"] is True and outcome["status"] == Status.COMPLETED
    assert sorted(sent[1:]) == sorted(row.pk for row in branches)
    assert RobotResult.objects.get(pk=refused[0]).task_id != ""
    runner.deliver(plan.pk, retried=True)  # nothing is left unsent: nothing goes twice
    assert len(sent) == 5


@pytest.mark.django_db(transaction=True)
def test_a_database_error_as_a_task_result_is_applied_leaves_it_running_for_the_jobs_retry(
        scripted_llm: Script, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The billing task answered, and storing its row with the turn's next state hit a locked database.

    Neither is stored, so the task is still running and the turn is not failed. Celery's retry of the job takes
    the row over and runs the task again; its model call is replayed from the checkpoint, not made again. Before,
    the job's error handler failed the turn, and when that handler met the locked database too, the retry found
    the row completed and skipped it, leaving the turn waiting on a task that was done.
    """
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True}
    llm = scripted_llm(text("billing"), text("Your refund is on its way."))
    sent: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: sent.append(pk))  # the broker
    turn = start_run("s1", "helpdesk", "I was charged twice")
    runner.deliver(turn.pk)
    runner.deliver(sent[-1])  # the classifier, which routes to billing
    billing = RobotResult.objects.get(pk=sent[-1])
    commit, refused = network_turns._commit, []

    def locked_once(*args: Any) -> Any:
        if not refused:
            refused.append(args[-1][0].pk)  # the outcome's row
            raise OperationalError("database is locked")
        return commit(*args)

    monkeypatch.setattr(network_turns, "_commit", locked_once)
    with pytest.raises(OperationalError, match="database is locked"):
        runner.deliver(billing.pk)
    billing.refresh_from_db()
    assert refused == [billing.pk] and billing.status == Status.RUNNING and billing.reply == ""
    assert RobotResult.objects.get(pk=turn.pk).status == Status.RUNNING
    assert len(llm.requests) == 2

    outcome = runner.deliver(billing.pk, retried=True)  # Celery's retry of the job
    assert (outcome["skipped"], outcome["status"], outcome["attempts"]) == (False, Status.COMPLETED, 2)
    turn.refresh_from_db()
    assert (turn.status, turn.reply) == (Status.COMPLETED, "Your refund is on its way.")
    assert len(llm.requests) == 2  # the billing call came from its checkpoint
    assert TurnState.from_dict(turn.turn_state).status["billing"] == "completed"
