"""Every error of the ACP and A2A endpoints is the protocol's own (issue 26, 2): JSON, never Django's HTML pages;
session ids are checked, an empty message does not run, and no message names an internal primary key."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from django.test import Client

from robotlab_django.models import RobotResult, Thread

pytestmark = pytest.mark.django_db



def _acp(token: str, body: Any, path: str = "/acp/runs") -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return Client().post(path, data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def _run(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"agent_name": "echo", "mode": "sync", "input": [{"parts": [{"content": text}]}], **extra}


def _a2a(token: str, body: Any, agent: str = "echo") -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return Client().post(f"/a2a/{agent}/", data, content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_A2A_VERSION="1.0")


def _send(parts: list[dict[str, Any]], **message: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 3, "method": "SendMessage",
            "params": {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": parts, **message}}}


def _error(response: Any) -> dict[str, Any]:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    return dict(response.json())


NESTED = "[" * 5000 + "]" * 5000


def test_acp_deep_json_and_unknown_paths_are_json_errors(token: str) -> None:
    nested = _acp(token, NESTED)
    assert nested.status_code == 422
    assert _error(nested) == {"code": "invalid_input",
                              "message": "The request body is not JSON this server reads: it nests too deeply."}
    for path in ("/acp/nowhere", "/acp/agents/echo/more", "/acp/runs/x/y/z"):
        for client_call in (Client().get, Client().post):
            missing = client_call(path, HTTP_AUTHORIZATION=f"Bearer {token}")
            assert missing.status_code == 404 and _error(missing)["code"] == "not_found", path


def test_acp_session_ids_are_uuids(token: str) -> None:
    for bad in ({"session_id": {"a": 1}}, {"session_id": "../../etc/passwd"}, {"session_id": 7},
                {"session": {"id": "not-a-uuid"}}, {"session": "x"}):
        response = _acp(token, _run(**bad))
        assert response.status_code == 422, bad
        assert _error(response)["code"] == "invalid_input", bad
    assert "A session id is a UUID" in _acp(token, _run(session_id={"a": 1})).json()["message"]
    mismatch = _acp(token, _run(session_id=str(uuid.uuid4()), session={"id": str(uuid.uuid4())}))
    assert mismatch.status_code == 422 and "name different sessions" in mismatch.json()["message"]
    assert not Thread.objects.exists() and not RobotResult.objects.exists()
    session = uuid.uuid4()
    run = _acp(token, _run(session_id=session.hex.upper())).json()  # any spelling of the UUID: its canonical form
    assert run["session_id"] == str(session)
    bad_path = Client().get("/acp/sessions/..%2F..%2Fetc", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert bad_path.status_code == 404 and _error(bad_path)["code"] == "not_found"


EMPTY = "The message is empty: send some text or a file."


def test_an_empty_message_does_not_run(token: str) -> None:
    for text in ("", "   \n "):
        response = _acp(token, _run(text))
        assert response.status_code == 422
        assert _error(response) == {"code": "invalid_input", "message": EMPTY}
        error = _a2a(token, _send([{"text": text}])).json()["error"]
        assert error["code"] == -32602 and error["message"] == EMPTY
    assert not RobotResult.objects.exists()


def test_errors_name_the_runs_public_id_not_its_primary_key(token: str) -> None:
    run = _acp(token, _run()).json()
    row = RobotResult.objects.get()
    cancel = Client().post(f"/acp/runs/{run['run_id']}/cancel", HTTP_AUTHORIZATION=f"Bearer {token}")
    message = _error(cancel)["message"]
    assert message == f"Run {run['run_id']} is completed: it finished, nothing to cancel."
    assert f"Run {row.pk} " not in message
    resume = _acp(token, {"await_resume": {"message": {"parts": [{"content": "x"}]}}}, f"/acp/runs/{run['run_id']}")
    assert resume.json()["message"].startswith(f"Run {run['run_id']} is completed, not awaiting an answer")


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20  # 5128 bytes


def _image(size: int) -> str:
    return base64.b64encode(PNG[:size]).decode()


def test_files_up_to_max_attachment_bytes_fit_a_body_over_django_s_limit(token: str, settings: Any) -> None:
    """The body limit makes room for ``MAX_ATTACHMENT_BYTES`` of files, so that setting's error is reachable."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    settings.ROBOTLAB = {**settings.ROBOTLAB, "MAX_ATTACHMENT_BYTES": 3000}
    acp_part = {"content_type": "image/png", "content_encoding": "base64"}
    fits = _acp(token, {**_run(), "input": [{"parts": [{"content": "Look"}, {**acp_part, "content": _image(2500)}]}]})
    assert fits.status_code == 200 and fits.json()["status"] == "completed", fits.content[:300]
    over = _acp(token, {**_run(), "input": [{"parts": [{"content": "Look"}, {**acp_part, "content": _image(3500)}]}]})
    assert over.status_code == 413 and "ROBOTLAB['MAX_ATTACHMENT_BYTES']" in _error(over)["message"]
    huge = _acp(token, {**_run(), "input": [{"parts": [{"content": "Look"}, {**acp_part, "content": _image(5000)}]}]})
    assert huge.status_code == 413 and _error(huge)["code"] == "invalid_input"
    assert "The request body is larger than 5000 bytes" in huge.json()["message"]
    a2a_part = {"mediaType": "image/png", "filename": "dot.png"}
    done = _a2a(token, _send([{"text": "Look"}, {**a2a_part, "raw": _image(2500)}])).json()
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    error = _a2a(token, _send([{"text": "Look"}, {**a2a_part, "raw": _image(3500)}])).json()["error"]
    assert error["code"] == -32602 and "MAX_ATTACHMENT_BYTES" in error["message"]
    response = _a2a(token, _send([{"text": "Look"}, {**a2a_part, "raw": _image(5000)}]))
    assert response.status_code == 413
    assert _error(response)["error"]["code"] == -32600
    assert "The request body is larger than 5000 bytes" in response.json()["error"]["message"]
    assert RobotResult.objects.count() == 2


def test_a2a_errors_are_json_rpc_errors(token: str) -> None:
    nested = _a2a(token, NESTED)
    assert nested.status_code == 400 and _error(nested)["error"] == {
        "code": -32700, "message": "The request body is not JSON this server reads: it nests too deeply."}
    brackets = _send([{"text": "hi"}], metadata={"lists": [[]] * 150})  # many brackets, shallow: checked, and runs
    assert _a2a(token, brackets).json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    for path in ("/a2a/echo/more", "/a2a/echo/.well-known/other.json", "/a2a/x/y/z"):
        missing = Client().get(path)
        assert missing.status_code == 404 and _error(missing)["error"]["code"] == -32601, path
    for context in ("has space", "tab\there", "nul\x00", "x" * 201):
        error = _a2a(token, _send([{"text": "hi"}], contextId=context)).json()["error"]
        assert error["code"] == -32602 and "context) id" in error["message"], context
    assert RobotResult.objects.count() == 1
