"""Approvals of tool calls in the app (issue 27, item 4): a write tool parks the run with the proposed call, the
run's user (or staff with ``robotlab.approve_toolcall``) approves or denies it, and the run goes on.

``transaction=True``: the resumed run replays its model call from the checkpoint stored on its own connection.
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
from robotlab.testing import FakeLLM, text, tool_call
from robotlab.tools import AskUser
from robotlab_django import services
from robotlab_django.models import RobotResult, RunEvent, Status, Thread, ToolApproval
from robotlab_django.registry import registry
from robotlab_django.runs import approvals
from robotlab_django.runs import control as run_control
from robotlab_django.tools import model_tools
from tests.robotlab_django.notesapp.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def notes_robot(clean_registry: None) -> None:
    """A robot with write tools on the notes (approval on, as model_tools' default)."""

    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="notes", local_tools=[*model_tools(Note, fields=["title", "status", "body"],
                                                                      owner_field="owner", write=True), AskUser],
                              **options)

    registry.register(build, name="notes", replace=True)


def person(name: str, *permissions: str, staff: bool = False) -> Any:
    created = get_user_model().objects.create_user(name, password="pw", is_staff=staff)
    found = Permission.objects.filter(codename__in=[p.split(".")[1] for p in permissions],
                                      content_type__app_label__in=[p.split(".")[0] for p in permissions])
    created.user_permissions.add(*found)
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


def update(**arguments: Any) -> Any:
    return tool_call("update_note", raw_arguments=json.dumps(arguments))


def park(scripted_llm: Callable[..., FakeLLM], owner: Any, note: Note) -> RobotResult:
    scripted_llm(update(id=note.pk, status="done", body="milk bought"))
    thread = Thread.objects.create(user=owner, robot_name="notes")
    return services.run_robot(thread, "notes", "Mark my milk note done", raise_errors=False)


def test_a_write_parks_the_run_with_the_call_and_its_before_and_after(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None, saves: list[Any]) -> None:
    alice = person("alice", "notesapp.change_note")
    note = Note.objects.create(owner=alice, title="buy milk")
    saves.clear()
    row = park(scripted_llm, alice, note)
    assert row.status == Status.AWAITING and saves == []
    question = row.question
    assert approvals.is_approval(question) and question["tool"] == "update_note"
    assert question["arguments"] == {"id": note.pk, "status": "done", "body": "milk bought"}
    assert question["details"]["changes"] == [{"field": "status", "before": "open", "after": "done"},
                                              {"field": "body", "before": "", "after": "milk bought"}]
    assert question["choices"] == ["approve", "deny"]
    assert question["question"].startswith("Approve update_note ")
    kinds = list(RunEvent.objects.filter(result=row).values_list("kind", flat=True))
    assert "hitl.requested" in kinds and "run.failed" not in kinds
    assert list(ToolApproval.objects.filter(pk=row.pk)) == [row]  # the admin's list
    assert list(approvals.waiting(RobotResult.objects.all())) == [row]


def test_approve_runs_the_write_once_and_the_model_reads_the_row(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None, saves: list[Any]) -> None:
    alice = person("alice", "notesapp.change_note")
    note = Note.objects.create(owner=alice, title="buy milk")
    row = park(scripted_llm, alice, note)
    saves.clear()
    again = scripted_llm(text("Marked it done."))
    done = run_control.decide(row, True, alice, request_id=row.question["request_id"])
    assert done.status == Status.COMPLETED and done.reply == "Marked it done."
    note.refresh_from_db()
    assert (note.status, note.body) == ("done", "milk bought") and saves == [(note.pk, "done")]
    assert len(again.requests) == 1  # the model call before the approval was replayed, not sent again
    assert json.loads(again.requests[0].messages[-1]["content"])["status"] == "done"
    assert done.answers[-1]["answer"] == "approve" and done.answers[-1]["by"] == "alice"
    resolved = RunEvent.objects.filter(result=row, kind="hitl.resolved").get().data
    assert resolved["answer"] == "approve" and resolved["by"] == "alice"


def test_deny_leaves_the_row_unchanged_and_the_model_reads_who_denied(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None, saves: list[Any]) -> None:
    alice = person("alice", "notesapp.change_note")
    note = Note.objects.create(owner=alice, title="buy milk")
    row = park(scripted_llm, alice, note)
    saves.clear()
    again = scripted_llm(text("Left it open."))
    done = run_control.answer(row, "deny", alice)  # what ACP and A2A send
    assert done.status == Status.COMPLETED
    note.refresh_from_db()
    assert (note.status, note.body, saves) == ("open", "", [])
    assert again.requests[0].messages[-1]["content"] == "denied by alice"


def test_another_user_and_staff_without_the_permission_may_not_decide(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None) -> None:
    alice = person("alice", "notesapp.change_note")
    row = park(scripted_llm, alice, Note.objects.create(owner=alice, title="buy milk"))
    bob = person("bob", "notesapp.change_note")
    staff = person("staff", staff=True)
    not_staff = person("clerk", approvals.PERMISSION)  # the permission without staff status
    inactive = person("gone", approvals.PERMISSION, staff=True)
    get_user_model().objects.filter(pk=inactive.pk).update(is_active=False)
    inactive.refresh_from_db()
    for who in (bob, staff, not_staff, inactive, None):
        assert not approvals.may_approve(row, who)
        with pytest.raises(run_control.NotOwnerError):
            run_control.decide(row, True, who)
        with pytest.raises(run_control.NotOwnerError):
            run_control.answer(row, "approve", who)
    row.refresh_from_db()
    assert row.status == Status.AWAITING
    assert approvals.may_approve(row, alice)


def test_staff_with_the_permission_decide_and_the_denial_names_them(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None) -> None:
    alice = person("alice", "notesapp.change_note")
    note = Note.objects.create(owner=alice, title="buy milk")
    row = park(scripted_llm, alice, note)
    boss = person("boss", approvals.PERMISSION, staff=True)
    assert approvals.may_approve(row, boss)
    again = scripted_llm(text("Not allowed."))
    run_control.decide(row, False, boss)
    assert again.requests[0].messages[-1]["content"] == "denied by boss"
    note.refresh_from_db()
    assert note.status == "open"


def test_a_wrong_answer_another_approval_or_a_question_are_refused(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None) -> None:
    alice = person("alice", "notesapp.change_note")
    row = park(scripted_llm, alice, Note.objects.create(owner=alice, title="buy milk"))
    with pytest.raises(run_control.BadAnswerError, match="answer 'approve' or 'deny', not 'maybe'"):
        run_control.answer(row, "maybe", alice)
    with pytest.raises(run_control.NotAwaitingError, match="decided already"):
        run_control.decide(row, True, alice, request_id="another")
    run_control.cancel(row, alice)
    with pytest.raises(run_control.NotAwaitingError):
        run_control.decide(row, True, alice)
    assert not approvals.waiting(RobotResult.objects.all()).exists()

    scripted_llm(tool_call("robot_lab--ask_user", question="Which note?"))
    asked = services.run_robot(Thread.objects.create(user=alice, robot_name="notes"), "notes", "Hm",
                               raise_errors=False)
    assert asked.status == Status.AWAITING and not approvals.is_approval(asked.question)
    with pytest.raises(run_control.NotAwaitingError, match="waits on a question"):
        run_control.decide(asked, True, alice)


def test_a_refused_write_fails_at_once_and_parks_nothing(scripted_llm: Callable[..., FakeLLM],
                                                        notes_robot: None) -> None:
    bob = person("bob")  # no change permission
    note = Note.objects.create(owner=bob, title="buy milk")
    scripted_llm(update(id=note.pk, status="done"), text("I may not."))
    row = services.run_robot(Thread.objects.create(user=bob, robot_name="notes"), "notes", "Mark it done")
    assert row.status == Status.COMPLETED and row.answers == []
    assert "you may not change notes" in json.dumps(row.messages)
