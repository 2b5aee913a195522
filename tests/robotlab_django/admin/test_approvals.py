"""The admin's list of tool calls waiting for approval: filters, the call shown escaped, and the actions only for
staff with ``robotlab.approve_toolcall``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

import robotlab
from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.registry import registry
from robotlab_django.tools import model_tools
from tests.robotlab_django.notesapp.models import Note

pytestmark = pytest.mark.django_db(transaction=True)
LIST = "/admin/robotlab/toolapproval/"


@pytest.fixture
def notes_robot(clean_registry: None) -> None:
    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="notes", local_tools=model_tools(Note, fields=["title", "body"],
                                                                    owner_field="owner", write=True), **options)

    registry.register(build, name="notes", replace=True)


def person(name: str, *codenames: str, staff: bool = False) -> Any:
    user = get_user_model().objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return get_user_model().objects.get(pk=user.pk)


def parked(scripted_llm: Callable[..., FakeLLM], owner: Any, title: str) -> tuple[RobotResult, Note]:
    note = Note.objects.create(owner=owner, title="old")
    scripted_llm(tool_call("update_note", raw_arguments=json.dumps({"id": note.pk, "title": title})))
    row = services.run_robot(Thread.objects.create(user=owner, robot_name="notes"), "notes", "rename",
                             raise_errors=False)
    assert row.status == Status.AWAITING
    return row, note


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_list_shows_the_waiting_calls_escaped_and_filters_them(scripted_llm: Callable[..., FakeLLM],
                                                                    notes_robot: None) -> None:
    alice, bob = person("alice", "change_note"), person("bob", "change_note")
    first, _ = parked(scripted_llm, alice, "<script>alert(1)</script>")
    second, _ = parked(scripted_llm, bob, "plain")
    scripted_llm(text("Hello."))
    services.run_robot(Thread.objects.create(user=bob, robot_name="notes"), "notes", "hi")  # completed: not listed
    boss = client_of(person("boss", "approve_toolcall", staff=True))
    body = boss.get(LIST).content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body and "<script>alert(1)" not in body
    assert "<del>old</del> → <ins>plain</ins>" in body and body.count("update_note") >= 2
    assert f"/admin/robotlab/robotresult/{first.pk}/change/" in body
    only_bob = boss.get(f"{LIST}?user={bob.pk}").content.decode()
    assert f"/robotresult/{second.pk}/change/" in only_bob and f"/robotresult/{first.pk}/change/" not in only_bob
    assert f"/robotresult/{first.pk}/change/" not in boss.get(f"{LIST}?tool=delete_note").content.decode()
    assert f"/robotresult/{first.pk}/" in boss.get(f"{LIST}?tool=update_note&robot=notes").content.decode()


def test_the_actions_decide_for_staff_with_the_permission_only(scripted_llm: Callable[..., FakeLLM],
                                                                notes_robot: None) -> None:
    alice = person("alice", "change_note")
    row, note = parked(scripted_llm, alice, "renamed")
    viewer = client_of(person("viewer", "view_toolapproval", staff=True))
    assert viewer.get(LIST).status_code == 200
    refused = viewer.post(LIST, {"action": "approve_calls", "_selected_action": [row.pk]})
    assert refused.status_code == 200  # Django offers no such action: the list again, nothing done
    assert client_of(person("staff", staff=True)).get(LIST).status_code == 403
    row.refresh_from_db()
    assert row.status == Status.AWAITING

    again = scripted_llm(text("Renamed."))
    boss = client_of(person("boss", "approve_toolcall", staff=True))
    assert boss.post(LIST, {"action": "approve_calls", "_selected_action": [row.pk]}).status_code == 302
    row.refresh_from_db()
    note.refresh_from_db()
    assert (row.status, note.title) == (Status.COMPLETED, "renamed")
    assert row.answers[-1]["by"] == "boss" and json.loads(again.requests[0].messages[-1]["content"])["title"] == (
        "renamed")
    assert f"/robotresult/{row.pk}/change/" not in boss.get(LIST).content.decode()


def test_deny_from_the_admin_names_the_staff_member(scripted_llm: Callable[..., FakeLLM], notes_robot: None) -> None:
    alice = person("alice", "change_note")
    row, note = parked(scripted_llm, alice, "renamed")
    again = scripted_llm(text("Kept."))
    boss = client_of(person("boss", "approve_toolcall", staff=True))
    boss.post(LIST, {"action": "deny_calls", "_selected_action": [row.pk]})
    note.refresh_from_db()
    assert note.title == "old" and again.requests[0].messages[-1]["content"] == "denied by boss"
