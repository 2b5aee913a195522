"""The chat page's controls of a tool call waiting for approval: the POST form and the websocket frame.

Who may decide is checked like the page's other controls: the thread's owner (as the page's thread is theirs),
and over the websocket also staff who may see the thread and hold ``robotlab.approve_toolcall``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connections
from django.test import Client
from django.urls import reverse

import robotlab
from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.registry import registry
from robotlab_django.tools import model_tools
from tests.robotlab_django.chat.test_consumers import _socket
from tests.robotlab_django.notesapp.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def notes_robot(clean_registry: None) -> None:
    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="notes", local_tools=model_tools(Note, fields=["title", "status", "body"],
                                                                    owner_field="owner", write=True), **options)

    registry.register(build, name="notes", replace=True)


@pytest.fixture
async def close_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


def person(name: str, *codenames: str, staff: bool = False) -> Any:
    user = get_user_model().objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return get_user_model().objects.get(pk=user.pk)


def parked(scripted_llm: Callable[..., FakeLLM], owner: Any) -> tuple[RobotResult, Note]:
    note = Note.objects.create(owner=owner, title="buy milk")
    call = {"id": note.pk, "status": "done", "body": "bought"}
    scripted_llm(tool_call("update_note", raw_arguments=json.dumps(call)))
    row = services.run_robot(Thread.objects.create(user=owner, robot_name="notes"), "notes", "done", raise_errors=False)
    assert row.status == Status.AWAITING
    return row, note


def test_the_form_posts_a_decision_for_the_owner_only(scripted_llm: Callable[..., FakeLLM], notes_robot: None,
                                                      settings: Any) -> None:
    from tests.robotlab_django.chat.test_views import URLCONF

    settings.ROOT_URLCONF = URLCONF
    alice = person("alice", "change_note")
    row, note = parked(scripted_llm, alice)
    url = reverse("robotlab:post_approval", kwargs={"pk": row.thread_id, "result_pk": row.pk})
    json_accept = {"HTTP_ACCEPT": "application/json"}
    request_id = row.question["request_id"]
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(url, {"decision": "approve", "request_id": request_id}).status_code == 403  # no CSRF token
    other = Client()
    other.force_login(person("bob", "change_note"))
    assert other.post(url, {"decision": "approve", "request_id": request_id}, **json_accept).status_code == 404
    client = Client()
    client.force_login(alice)
    assert client.post(url, {"decision": "maybe"}, **json_accept).status_code == 400
    stale = client.post(url, {"decision": "approve", "request_id": "not-this-one"}, **json_accept)
    assert stale.status_code == 409 and "decided already" in stale.json()["error"]
    note.refresh_from_db()
    assert note.status == "open"
    scripted_llm(text("Done."))
    decided = client.post(url, {"decision": "approve", "request_id": request_id})  # the form without script
    assert decided.status_code == 302 and decided.url == reverse("robotlab:chat", kwargs={"pk": row.thread_id})
    note.refresh_from_db()
    assert note.status == "done"


async def test_the_websocket_takes_a_decision_from_the_owner_and_from_staff_with_the_permission(
        scripted_llm: Callable[..., FakeLLM], notes_robot: None, close_connections: None) -> None:
    alice = await sync_to_async(person)("alice", "change_note")
    row, note = await sync_to_async(parked)(scripted_llm, alice)
    viewer = await sync_to_async(person)("viewer", "view_thread", staff=True)  # may watch, may not decide
    boss = await sync_to_async(person)("boss", "view_thread", "approve_toolcall", staff=True)

    async def send(user: Any, frame: dict[str, Any]) -> dict[str, Any]:
        client = Client()
        await sync_to_async(client.force_login)(user)
        socket = await _socket(row.thread_id, client.cookies["sessionid"].value)
        assert (await socket.connect())[0] is True
        await socket.send_json_to(frame)
        while True:
            reply = await socket.receive_json_from(timeout=10)
            if reply["type"] != "events":
                await socket.disconnect()
                return reply

    frame = {"type": "approval", "result_id": row.pk, "request_id": row.question["request_id"], "decision": "deny"}
    assert await send(alice, {**frame, "decision": "perhaps"}) == {
        "type": "error", "error": 'An approval needs a "decision": "approve" or "deny".'}
    refused = await send(viewer, frame)
    assert refused["type"] == "error" and "not on a thread of yours" in refused["error"]
    again = scripted_llm(text("Left open."))
    assert await send(boss, frame) == {"type": "decided", "result_id": row.pk, "status": "completed"}
    await sync_to_async(note.refresh_from_db)()
    assert note.status == "open" and again.requests[0].messages[-1]["content"] == "denied by boss"
    assert (await send(alice, frame))["type"] == "error"  # decided already
