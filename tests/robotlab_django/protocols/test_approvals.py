"""ACP and A2A show a run parked on a tool call as awaiting input, with the call, and take ``approve`` or ``deny``.

In process (the ``sync`` executor, a scripted model): inside the test's transaction nothing is checkpointed, so the
resumed run asks the model again, which proposes the same call; the stored decision answers it.
"""

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
from robotlab_django.registry import registry
from robotlab_django.tools import model_tools
from tests.robotlab_django.notesapp.models import Note

pytest.importorskip("a2a.server.routes.jsonrpc_dispatcher")

pytestmark = pytest.mark.django_db


@pytest.fixture
def note(clean_registry: None, token: str) -> Note:
    """A note of ada (the token's user, who may change notes), and a robot that renames it after approval."""

    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="notes", local_tools=model_tools(Note, fields=["title"], owner_field="owner",
                                                                    write=True), **options)

    registry.register(build, name="notes", replace=True)
    ada = get_user_model().objects.get(username="ada")
    ada.user_permissions.add(Permission.objects.get(codename="change_note"))
    return Note.objects.create(owner=ada, title="old")


def rename(note: Note) -> Any:
    return tool_call("update_note", raw_arguments=json.dumps({"id": note.pk, "title": "new"}))


def acp(token: str, body: dict[str, Any], path: str = "/acp/runs") -> dict[str, Any]:
    response = Client().post(path, json.dumps(body), content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}")
    return dict(response.json())


def resume(token: str, run_id: str, answer: str) -> dict[str, Any]:
    return acp(token, {"await_resume": {"type": "message", "message": {"parts": [{"content": answer}]}},
                       "mode": "sync"}, f"/acp/runs/{run_id}")


def test_acp_awaits_with_the_call_and_approve_runs_it(token: str, note: Note,
                                                      scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(rename(note), rename(note), text("Renamed."))
    run = acp(token, {"agent_name": "notes", "mode": "sync", "input": [{"parts": [{"content": "rename it"}]}]})
    assert run["status"] == "awaiting"
    text_part, call_part = run["await_request"]["message"]["parts"]
    assert text_part["content"].startswith("Approve update_note")
    assert call_part["name"] == "approval" and call_part["content_type"] == "application/json"
    call = json.loads(call_part["content"])
    assert (call["tool"], call["arguments"], call["choices"]) == ("update_note", {"id": note.pk, "title": "new"},
                                                                  ["approve", "deny"])
    assert call["details"]["changes"] == [{"field": "title", "before": "old", "after": "new"}]
    note.refresh_from_db()
    assert note.title == "old"
    refused = resume(token, run["run_id"], "perhaps")
    assert refused["code"] == "invalid_input" and "answer 'approve' or 'deny'" in refused["message"]
    done = resume(token, run["run_id"], "approve")
    assert done["status"] == "completed" and done["output"][0]["parts"][0]["content"] == "Renamed."
    note.refresh_from_db()
    assert note.title == "new"


def test_acp_deny_leaves_the_row(token: str, note: Note, scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(rename(note), rename(note), text("Kept."))
    run = acp(token, {"agent_name": "notes", "mode": "sync", "input": [{"parts": [{"content": "rename it"}]}]})
    assert resume(token, run["run_id"], "deny")["status"] == "completed"
    note.refresh_from_db()
    assert note.title == "old" and llm.requests[-1].messages[-1]["content"] == "denied by ada"


def test_a2a_asks_for_input_with_the_call_and_takes_the_decision(token: str, note: Note,
                                                                 scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(rename(note), rename(note), text("Renamed."))

    def send(text_: str, **message: Any) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
            "role": "ROLE_USER", "messageId": f"m-{text_}", "parts": [{"text": text_}], **message}}}
        response = Client().post("/a2a/notes/", body, content_type="application/json", HTTP_A2A_VERSION="1.0",
                                 HTTP_AUTHORIZATION=f"Bearer {token}")
        return dict(response.json())

    task = send("rename it")["result"]["task"]
    status = task["status"]
    assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
    metadata = status["message"]["metadata"]
    assert metadata["type"] == "approval" and metadata["tool"] == "update_note"
    assert metadata["choices"] == ["approve", "deny"] and metadata["arguments"]["title"] == "new"
    assert metadata["details"]["changes"][0] == {"field": "title", "before": "old", "after": "new"}
    assert "1. approve\n2. deny" in status["message"]["parts"][0]["text"]
    wrong = send("perhaps", taskId=task["id"], contextId=task["contextId"])
    assert wrong["error"]["code"] == -32602 and "answer 'approve' or 'deny'" in wrong["error"]["message"]
    done = send("1", taskId=task["id"], contextId=task["contextId"])["result"]["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    note.refresh_from_db()
    assert note.title == "new"
