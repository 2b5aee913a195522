"""The A2A server in process (the ``sync`` executor, the instant demo model or a scripted one): its cards, its
errors, protocol 0.3 wire shapes, a network's stream, and task lists.

The end-to-end tests with the SDK's client against daphne are in tests/example_project/test_a2a.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from robotlab.testing import FakeLLM, text
from robotlab_django.models import RobotResult

pytest.importorskip("a2a.server.routes.jsonrpc_dispatcher")

pytestmark = pytest.mark.django_db



def _rpc(token: str, agent: str, method: str, params: dict[str, Any], *, version: str | None = "1.0") -> Any:
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    if version:
        headers["HTTP_A2A_VERSION"] = version
    return Client().post(f"/a2a/{agent}/", {"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
                         content_type="application/json", **headers)


def _send(text_: str, **message: Any) -> dict[str, Any]:
    return {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text_}], **message}}


def _sse(response: Any) -> list[dict[str, Any]]:
    """The events of a stream (the test client is WSGI: the server sends it whole once it ends)."""
    assert response["Content-Type"].startswith("text/event-stream")
    body = response.content.decode()
    return [json.loads(line[len("data: "):]) for line in body.splitlines() if line.startswith("data: ")]


def test_the_index_and_cards_list_every_robot_and_network(token: str) -> None:
    client = Client()
    names = {card["name"] for card in client.get("/a2a/").json()["agents"]}
    assert {"echo", "calculator", "helpdesk"} <= names
    card = client.get("/a2a/helpdesk/.well-known/agent-card.json").json()
    assert card["description"] == "Routes <your> question to a specialist"
    assert card["supportedInterfaces"][0]["url"] == "http://testserver/a2a/helpdesk/"
    assert card["skills"][0]["tags"] == ["network", "robotlab"]
    assert client.get("/a2a/nobody/.well-known/agent-card.json").status_code == 404


def test_bad_requests_get_clear_errors(token: str) -> None:
    assert Client().get("/a2a/echo/").status_code == 405
    unauthorized = _rpc("", "echo", "SendMessage", _send("hi"))
    assert unauthorized.status_code == 401 and "Bearer" in unauthorized.json()["error"]["message"]
    assert _rpc(token, "nobody", "SendMessage", _send("hi")).status_code == 404
    data_part = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"data": {"a": 1}}]}}
    error = _rpc(token, "echo", "SendMessage", data_part).json()["error"]
    assert error["code"] == -32602 and "Part 1: unsupported data part; send text, raw or url parts" in error["message"]
    ftp = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"url": "ftp://x.test/a.png"}]}}
    error = _rpc(token, "echo", "SendMessage", ftp).json()["error"]
    assert error["code"] == -32602 and "Part 1: a file's url must be an http(s) or data: URL" in error["message"]
    untyped = {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}, {"raw": "aGk="}]}}
    error = _rpc(token, "echo", "SendMessage", untyped).json()["error"]
    assert error["code"] == -32602 and error["message"].startswith("Part 2: Attachment")
    assert _rpc(token, "echo", "NoSuchMethod", {}).json()["error"]["code"] == -32601
    for task_id in ("not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        error = _rpc(token, "echo", "GetTask", {"id": task_id}).json()["error"]
        assert error["code"] == -32001 and task_id in error["message"]
    assert not RobotResult.objects.exists()


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def test_file_parts_reach_the_model_as_attachments(token: str, scripted_llm: Callable[..., FakeLLM],
                                                   settings: Any) -> None:
    import base64

    llm = scripted_llm(text("A dot and a cat."))
    parts = [{"text": "What is in these?"},
             {"raw": base64.b64encode(PNG).decode(), "mediaType": "image/png", "filename": "dot.png"},
             {"url": "https://example.com/cat.jpg", "mediaType": "image/jpeg"}]
    result = _rpc(token, "echo", "SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m1",
                                                             "parts": parts}}).json()["result"]
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    row = RobotResult.objects.get()
    assert (row.input, [item.get("name") for item in row.attachments]) == ("What is in these?", ["dot.png", None])
    content = llm.requests[0].messages[-1]["content"]
    assert [part["type"] for part in content] == ["text", "image_url", "image_url"]
    assert content[1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert content[2]["image_url"]["url"] == "https://example.com/cat.jpg"
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENT_BYTES": 8}
    error = _rpc(token, "echo", "SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m2",
                                                            "parts": parts}}).json()["error"]
    assert error["code"] == -32602 and "MAX_ATTACHMENT_BYTES" in error["message"]
    assert RobotResult.objects.count() == 1  # nothing was queued


def test_message_send_in_protocol_0_3_returns_a_0_3_task(token: str) -> None:
    params = {"message": {"kind": "message", "role": "user", "messageId": "m1",
                          "parts": [{"kind": "text", "text": "Hello there"}]}}
    result = _rpc(token, "echo", "message/send", params, version=None).json()["result"]
    row = RobotResult.objects.get()
    assert result["kind"] == "task" and result["status"]["state"] == "completed"
    assert result["id"].replace("-", "") == row.run_id and result["contextId"] == row.thread.session_id
    assert result["artifacts"][0]["parts"][0]["text"] == row.reply and row.reply
    fetched = _rpc(token, "echo", "tasks/get", {"id": result["id"]}, version=None).json()["result"]
    assert fetched["status"]["state"] == "completed"


def test_a_network_streams_its_tasks_and_its_reply(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("billing"), text("Your refund is on its way."))
    response = _rpc(token, "helpdesk", "SendStreamingMessage", _send("I was charged twice"))
    results = [event["result"] for event in _sse(response)]
    turn = RobotResult.objects.get(parent__isnull=True)
    assert turn.status == "completed" and turn.reply == "Your refund is on its way."
    artifacts = [result["artifactUpdate"]["artifact"] for result in results if "artifactUpdate" in result]
    by_id: dict[str, str] = {}
    for artifact in artifacts:
        by_id[artifact["artifactId"]] = by_id.get(artifact["artifactId"], "") + artifact["parts"][0]["text"]
    assert by_id == {"task-classifier": "billing", "task-billing": "Your refund is on its way.",
                     "reply": "Your refund is on its way."}
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_tasks_are_listed_newest_first_a_page_at_a_time(token: str) -> None:
    sent = [_rpc(token, "echo", "SendMessage", _send(f"message {n}")).json()["result"]["task"] for n in range(3)]
    _rpc(token, "calculator", "SendMessage", _send("another agent's task"))
    first = _rpc(token, "echo", "ListTasks", {"pageSize": 2}).json()["result"]
    assert [task["id"] for task in first["tasks"]] == [sent[2]["id"], sent[1]["id"]]
    assert first["totalSize"] == 3 and first["nextPageToken"]
    second = _rpc(token, "echo", "ListTasks", {"pageSize": 2, "pageToken": first["nextPageToken"]}).json()["result"]
    assert [task["id"] for task in second["tasks"]] == [sent[0]["id"]] and not second.get("nextPageToken")
    subscribe = _rpc(token, "echo", "SubscribeToTask", {"id": sent[0]["id"]}).json()
    assert "is finished; get it with GetTask" in subscribe["error"]["message"]


def test_without_the_protocols_extra_the_import_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib
    import importlib.util

    import robotlab_django.a2a

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "sse_starlette" else find_spec(name))
    with pytest.raises(ImproperlyConfigured, match=r'needs sse_starlette: pip install "robotlab-py\[protocols\]"'):
        importlib.reload(robotlab_django.a2a)
    monkeypatch.undo()
    importlib.reload(robotlab_django.a2a)


def test_file_parts_are_counted_and_private_urls_refused(token: str, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENTS": 1}
    two = [{"text": "Look"}, {"url": "https://93.184.215.14/a.jpg", "mediaType": "image/jpeg"},
           {"url": "https://93.184.215.14/b.jpg", "mediaType": "image/jpeg"}]
    error = _rpc(token, "echo", "SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m1",
                                                            "parts": two}}).json()["error"]
    assert error["code"] == -32602 and "MAX_ATTACHMENTS" in error["message"]
    metadata = [{"text": "Look"}, {"url": "http://169.254.169.254/latest/x.png", "mediaType": "image/png"}]
    error = _rpc(token, "echo", "SendMessage", {"message": {"role": "ROLE_USER", "messageId": "m2",
                                                            "parts": metadata}}).json()["error"]
    assert error["code"] == -32602 and "not a public address" in error["message"]
    assert not RobotResult.objects.exists()
