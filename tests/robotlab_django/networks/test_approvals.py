"""Approvals inside network turns (issue 27, item 4): a task robot's write waits for a person, in one process and
one job per task.

The ``notesnet`` network is ``intake -> clerk``; the clerk has write tools on the notes (approval on, as
``model_tools``' default). Its write parks the turn; ``approve`` runs the write once and the turn completes with
the clerk's reply; ``deny`` leaves the row as it was and the clerk's model reads ``denied by <user>``.

``transaction=True``: the resumed turn replays its model calls from the checkpoints stored on their own connection.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models.signals import post_save

import robotlab
from robotlab.network import create_network
from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django.models import RobotResult, RunEvent, RunStep, Status, Thread, ToolEffect
from robotlab_django.registry import registry
from robotlab_django.runs import approvals, executor
from robotlab_django.runs import control as run_control
from robotlab_django.runs.records import start_run
from robotlab_django.tools import model_tools
from tests.robotlab_django.notesapp.models import Note

pytestmark = pytest.mark.django_db(transaction=True)

Script = Callable[..., FakeLLM]


@pytest.fixture(params=["one process", "distributed"])
def notesnet(request: pytest.FixtureRequest, settings: Any, clean_registry: None) -> bool:
    """The ``notesnet`` network, its turns run in one process or one job per task (the ``sync`` executor)."""

    def build(**options: Any) -> robotlab.Network:
        network = create_network(name="notesnet")
        network.task("intake", robotlab.build(name="intake", system_prompt="You sort requests.", **options))
        network.task("clerk", robotlab.build(
            name="clerk", system_prompt="You keep the user's notes.",
            local_tools=model_tools(Note, fields=["title", "status", "body"], owner_field="owner", write=True),
            **options), depends_on=["intake"])
        return network

    registry.register_network(build, name="notesnet", replace=True)
    distributed = request.param == "distributed"
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": distributed}
    return distributed


@pytest.fixture
def alice() -> Any:
    created = get_user_model().objects.create_user("alice", password="pw")
    created.user_permissions.add(Permission.objects.get(codename="change_note",
                                                        content_type__app_label="notesapp"))
    return get_user_model().objects.get(pk=created.pk)


@pytest.fixture
def saves() -> Iterator[list[Any]]:
    """The notes saved during the test, one entry per save."""
    saved: list[Any] = []

    def count(sender: Any, instance: Any, **kwargs: Any) -> None:
        saved.append((instance.pk, instance.status))

    post_save.connect(count, sender=Note, weak=False)
    try:
        yield saved
    finally:
        post_save.disconnect(count, sender=Note)


def parked_turn(scripted_llm: Script, owner: Any, note: Note) -> tuple[RobotResult, FakeLLM]:
    """A ``notesnet`` turn whose clerk asked to mark ``note`` done, parked on the approval."""
    arguments = {"id": note.pk, "status": "done", "body": "milk bought"}
    llm = scripted_llm(text("a note to update"), tool_call("update_note", raw_arguments=json.dumps(arguments)))
    turn = start_run(Thread.objects.create(user=owner, robot_name="notesnet"), "notesnet", "Mark my milk note done")
    executor.dispatch(turn)
    turn.refresh_from_db()
    return turn, llm


def clerk_row(turn: RobotResult) -> RobotResult:
    return RobotResult.objects.get(parent_id=turn.pk, robot_name="clerk")


def test_a_task_robots_write_parks_the_turn_with_the_call_and_its_before_and_after(
        scripted_llm: Script, notesnet: bool, alice: Any, saves: list[Any]) -> None:
    note = Note.objects.create(owner=alice, title="buy milk")
    saves.clear()
    turn, llm = parked_turn(scripted_llm, alice, note)
    assert turn.status == Status.AWAITING and saves == [] and len(llm.requests) == 2
    question = turn.question
    assert approvals.is_approval(question) and question["tool"] == "update_note"
    assert question["arguments"] == {"id": note.pk, "status": "done", "body": "milk bought"}
    assert question["details"]["changes"] == [{"field": "status", "before": "open", "after": "done"},
                                              {"field": "body", "before": "", "after": "milk bought"}]
    if notesnet:  # the clerk's own row waits too, with the same question
        task = clerk_row(turn)
        assert task.status == Status.AWAITING and task.question == question
    assert list(approvals.waiting(RobotResult.objects.filter(parent_id=None))) == [turn]
    kinds = RunEvent.objects.filter(thread_id=turn.thread_id).values_list("kind", flat=True)
    assert "hitl.requested" in kinds and "run.failed" not in kinds
    assert not ToolEffect.objects.exists()  # nothing started: the call waits before its journal row


def test_approve_runs_the_write_once_and_the_turn_completes(
        scripted_llm: Script, notesnet: bool, alice: Any, saves: list[Any]) -> None:
    note = Note.objects.create(owner=alice, title="buy milk")
    turn, _first = parked_turn(scripted_llm, alice, note)
    saves.clear()
    again = scripted_llm(text("Marked it done."))
    done = run_control.decide(turn, True, alice, request_id=turn.question["request_id"])
    assert (done.status, done.reply) == (Status.COMPLETED, "Marked it done.")
    note.refresh_from_db()
    assert (note.status, note.body) == ("done", "milk bought") and saves == [(note.pk, "done")]
    assert len(again.requests) == 1  # intake's call and the clerk's first call were replayed, not sent again
    assert json.loads(again.requests[0].messages[-1]["content"])["status"] == "done"
    [effect] = ToolEffect.objects.all()
    assert (effect.tool_name, effect.status, effect.user_id) == ("update_note", ToolEffect.Status.COMPLETED,
                                                                 alice.pk)
    clerk = clerk_row(done)
    assert (clerk.status, clerk.reply) == (Status.COMPLETED, "Marked it done.")
    decided = (clerk if notesnet else done).answers[-1]  # the row that waited keeps the decision
    assert decided["answer"] == "approve" and decided["by"] == "alice"
    kinds = list(RunEvent.objects.filter(result_id=done.pk).values_list("kind", flat=True))
    assert kinds.count("run.completed") == 1 and kinds[-1] == "stream.ended"
    if not notesnet:  # one process: each robot's steps are checkpointed on the turn's row, none twice
        indexes = list(RunStep.objects.filter(result=done).values_list("idx", flat=True))
        assert len(indexes) == len(set(indexes))


def test_deny_leaves_the_row_unchanged_and_the_task_robot_reads_who_denied(
        scripted_llm: Script, notesnet: bool, alice: Any, saves: list[Any]) -> None:
    note = Note.objects.create(owner=alice, title="buy milk")
    turn, _first = parked_turn(scripted_llm, alice, note)
    saves.clear()
    again = scripted_llm(text("Left it open."))
    done = run_control.answer(turn, "deny", alice)  # what ACP and A2A send
    assert (done.status, done.reply) == (Status.COMPLETED, "Left it open.")
    note.refresh_from_db()
    assert (note.status, note.body, saves) == ("open", "", [])
    assert again.requests[0].messages[-1]["content"] == "denied by alice"
    [effect] = ToolEffect.objects.all()
    assert effect.status == ToolEffect.Status.DENIED


def test_only_the_turns_user_decides_a_task_robots_call(
        scripted_llm: Script, notesnet: bool, alice: Any) -> None:
    turn, _first = parked_turn(scripted_llm, alice, Note.objects.create(owner=alice, title="buy milk"))
    bob = get_user_model().objects.create_user("bob", password="pw")
    with pytest.raises(run_control.NotOwnerError):
        run_control.decide(turn, True, bob)
    turn.refresh_from_db()
    assert turn.status == Status.AWAITING
