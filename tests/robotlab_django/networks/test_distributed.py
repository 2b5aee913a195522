"""Distributed network turns in one process: the ``sync`` executor runs every job (the turn's start and each
task) at once, in turn, through the same rows, claims and turn state a Celery worker uses.

The real workers are in test_network_workers.py; here the jobs are called directly, so the exactly-once
rules (a duplicate delivery, a stale advance, a task out of attempts) are checked one step at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError

from robotlab.llm.types import LLMRequest, LLMResponse, ToolCallRequest
from robotlab.network import TurnState
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django.models import BudgetLedger, RobotResult, RunEvent, Status, UsageRollup
from robotlab_django.networks import advance
from robotlab_django.networks.graph import task_boxes, turn_graph
from robotlab_django.runs import executor, runner
from robotlab_django.runs.history import load_history
from robotlab_django.runs.records import current_worker, start_run
from robotlab_django.runs.runnables import build_network
from robotlab_django.runs.sync_bridge import blocking, call_sync
from tests.robotlab_django.fanout import BUDGET_ENV

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
    assert call_sync(advance.aadvance, turn_after, network, "classifier",
                     result=state.results["classifier"]) == []  # the turn is over: nothing happens
    # a change read at an older version is refused whole: another worker changed the turn first
    assert advance._commit(turn_after, turn.turn_version - 1, state, ["technical"], network, None) is None
    assert RobotResult.objects.get(pk=turn.pk).turn_version == turn.turn_version and len(task_rows(turn)) == 2


def test_a_task_out_of_attempts_fails_the_turn_naming_the_task(scripted_llm: Script, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread", "DISTRIBUTED_NETWORKS": True,
                         "NETWORK_INLINE_TASKS": False}  # every task its own job (test_inline.py: run by another's)
    scripted_llm(text("billing"))
    turn = start_run("s1", "helpdesk", "Refund please")
    runner.deliver(turn.pk)  # the turn starts; its first task is queued (the thread executor waits for a commit)
    [task] = task_rows(turn)
    assert (task.task_name, task.status) == ("classifier", Status.QUEUED)
    child = subprocess.Popen([sys.executable, "-c", ""])
    child.wait()  # its worker died 3 times: the claim names a process of this host that is gone
    RobotResult.objects.filter(pk=task.pk).update(status=Status.RUNNING, attempts=3, worker=current_worker()[0],
                                                  worker_pid=child.pid)
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
                         "NETWORK_INLINE_TASKS": False,  # every task its own job (test_inline.py: run by another's)
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
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True,
                         "NETWORK_INLINE_TASKS": False}  # every task its own job (test_inline.py: run by another's)
    llm = scripted_llm(text("billing"), text("Your refund is on its way."))
    sent: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: sent.append(pk))  # the broker
    turn = start_run("s1", "helpdesk", "I was charged twice")
    runner.deliver(turn.pk)
    runner.deliver(sent[-1])  # the classifier, which routes to billing
    billing = RobotResult.objects.get(pk=sent[-1])
    commit, refused = advance._commit, []

    def locked_once(*args: Any) -> Any:
        if not refused:
            refused.append(args[-1][0].pk)  # the outcome's row
            raise OperationalError("database is locked")
        return commit(*args)

    monkeypatch.setattr(advance, "_commit", locked_once)
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


@pytest.mark.django_db(transaction=True)
def test_a_task_run_again_from_its_checkpoint_counts_its_replayed_call_once_in_the_turns_budget(
        scripted_llm: Script, settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan task answered and its job's retry ran it again (a locked database, as above): its model call is
    replayed from the checkpoint, and the turn's ``token_budget`` ledger, which counted the call when it was made,
    does not count it again. Before, the ledger counted 15 tokens more than the model was paid (the budget workers'
    test saw it when a slowed job was run again) and a spent budget refused the replay."""
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True,
                         "NETWORK_INLINE_TASKS": False,  # every task its own job (test_inline.py: run by another's)
                         "NETWORKS": {"fanout": "tests.robotlab_django.fanout.fanout_network"}}
    monkeypatch.setenv("ROBOTLAB_TEST_FANOUT", "1")
    monkeypatch.setenv(BUDGET_ENV, "10000")
    llm = scripted_llm(text("Plan.", usage=(10, 5)), text("Branch.", usage=(10, 5)), text("Done.", usage=(10, 5)))
    sent: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: sent.append(pk))  # the broker
    turn = start_run("s1", "fanout", "Split it")
    runner.deliver(turn.pk)
    plan = sent[-1]
    commit = advance._commit

    def locked_once(*args: Any) -> Any:
        monkeypatch.setattr(advance, "_commit", commit)
        raise OperationalError("database is locked")

    monkeypatch.setattr(advance, "_commit", locked_once)
    with pytest.raises(OperationalError, match="database is locked"):
        runner.deliver(plan)
    assert runner.deliver(plan, retried=True)["attempts"] == 2  # Celery's retry of the job
    while sent[-1] != plan and RobotResult.objects.filter(pk=sent[-1], status=Status.QUEUED).exists():
        runner.deliver(sent[-1])  # branch_1, then reduce
    turn.refresh_from_db()
    assert turn.status == Status.COMPLETED
    assert len(llm.requests) == 3, [  # plan's call came from its checkpoint the second time
        (row.robot_name, row.status, row.attempts, row.reply[:40], row.steps.count()) for row in task_rows(turn)]
    on_rows = sum(row.input_tokens + row.output_tokens for row in task_rows(turn))
    rolled = sum(r.input_tokens + r.output_tokens for r in UsageRollup.objects.all())
    ledger = BudgetLedger.objects.get(scope=f"network:{turn.run_id}")
    assert (on_rows, rolled, ledger.consumed_tokens, ledger.reserved_tokens) == (45, 45, 45, 0)


class FailsTheTurnMidBranch:
    """The fanout's model: ``plan`` and each branch's calls answer (a ``note`` call, then text, 10 + 5 tokens each).

    While ``branch_1``'s first call is in flight, ``branch_2`` fails the turn as a task out of attempts on another
    worker would (:func:`advance.aadvance`). ``paid`` sums the tokens of every call answered.
    """

    def __init__(self, turn: Any) -> None:
        self.turn, self.calls, self.paid = turn, [], 0

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        task = str(request.messages[0].get("content", "")).removeprefix("You are the ").removesuffix(" robot.")
        self.calls.append(task)
        if task == "branch_1" and self.calls.count(task) == 1:
            turn = await blocking(RobotResult.objects.get, pk=self.turn.pk)
            await advance.aadvance(turn, build_network("fanout", llm=self), "branch_2",
                                         error="AttemptsExhausted: its worker was lost each time")
        self.paid += 15
        if task.startswith("branch_") and self.calls.count(task) == 1:
            return LLMResponse(tool_calls=[ToolCallRequest(id="n1", name="note", arguments=json.dumps({"text": task}))],
                               finish_reason="tool_calls", input_tokens=10, output_tokens=5)
        return LLMResponse(content=f"{task} done", finish_reason="stop", input_tokens=10, output_tokens=5)


@pytest.mark.django_db(transaction=True)
def test_a_failed_turn_stops_its_running_and_queued_siblings_and_records_what_they_paid(
        settings: Any, monkeypatch: pytest.MonkeyPatch, postgres: None) -> None:
    """Issue 25 (4): a task fails the turn while a sibling's call is in flight and another sibling is queued.

    The running sibling stops before its next call (the call in flight finishes: it is paid), the queued one is
    cancelled, and every paid token is on a row, in the usage rollups and in the turn's budget ledger. Before, the
    running sibling went on calling the model for a failed turn. On PostgreSQL (the turn fails from inside a
    model call while the run's checkpoint thread writes: the in-memory SQLite database locks whole tables).
    """
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery", "DISTRIBUTED_NETWORKS": True,
                         "NETWORK_INLINE_TASKS": False,  # every task its own job (test_inline.py: run by another's)
                         "NETWORKS": {"fanout": "tests.robotlab_django.fanout.fanout_network"}}
    monkeypatch.setenv("ROBOTLAB_TEST_FANOUT", "3")
    monkeypatch.setenv(BUDGET_ENV, "10000")  # the turn's token budget: its ledger counts what the calls used
    sent: list[Any] = []
    monkeypatch.setattr(executor, "_send", lambda pk, task_id, queue: sent.append(pk))  # the broker
    turn = start_run("s1", "fanout", "Split it")
    llm = FailsTheTurnMidBranch(turn)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
    runner.deliver(turn.pk)
    runner.deliver(sent[-1])  # plan: queues the three branches
    branches = {row.task_name: row for row in RobotResult.objects.filter(pk__in=sent[-3:])}
    runner.deliver(branches["branch_1"].pk)  # branch_2 fails the turn during its first call

    turn.refresh_from_db()
    assert (turn.status, turn.error_type) == (Status.FAILED, "AttemptsExhausted")
    assert llm.calls == ["plan", "branch_1"]  # not branch_1's second call (nor branch_3's)
    rows = {row.task_name: row for row in task_rows(turn)}
    assert (rows["branch_1"].status, rows["branch_3"].status) == (Status.CANCELLED, Status.CANCELLED)
    assert (rows["branch_1"].input_tokens, rows["branch_1"].output_tokens) == (10, 5)
    assert runner.deliver(branches["branch_3"].pk)["skipped"] and llm.calls == ["plan", "branch_1"]
    on_rows = sum(row.input_tokens + row.output_tokens for row in rows.values())
    rolled = sum(r.input_tokens + r.output_tokens for r in UsageRollup.objects.all())
    ledger = BudgetLedger.objects.get(scope=f"network:{turn.run_id}")
    assert on_rows == rolled == ledger.consumed_tokens == llm.paid == 30
    assert ledger.reserved_tokens == 0
    # the stopped and cancelled rows' events are the turn's on a page (no bubble of their own)
    assert set(RunEvent.objects.filter(thread_id=turn.thread_id).values_list("run_id", flat=True)) == {turn.run_id}


def test_a_turn_that_keeps_changing_is_named_by_its_public_id(scripted_llm: Script, distributed: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The error can reach a user (a protocol's failed run): it names the run as the protocols do, not its key."""
    scripted_llm()
    turn = start_run("s1", "helpdesk", "Hello")
    monkeypatch.setattr(advance, "ADVANCE_ATTEMPTS", 0)  # every attempt lost to another worker
    with pytest.raises(RuntimeError, match="changed 0 times") as raised:
        call_sync(advance.aadvance, turn, build_network("helpdesk"), "classifier", error="boom")
    assert str(uuid.UUID(turn.run_id)) in str(raised.value) and f" {turn.pk} " not in str(raised.value)
