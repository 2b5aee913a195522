"""ACP session ids and A2A context ids are per user (issue 26, 8): another user's id is a new session of one's own,
so an id is neither an oracle of other users' sessions nor a way to take one."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from robotlab_django.models import RobotResult, Thread

pytestmark = pytest.mark.django_db


def _token(username: str) -> str:
    get_user_model().objects.create_user(username, password="pw")
    out = io.StringIO()
    call_command("robotlab_token", username, stdout=out)
    return out.getvalue().strip().splitlines()[-1]


@pytest.fixture
def tokens(settings: Any) -> tuple[str, str]:
    """Tokens of ``ada`` and ``bob``, the URLconf serving ``/acp/`` and ``/a2a/``."""
    settings.ROOT_URLCONF = "tests.robotlab_django.acp_urls"
    return _token("ada"), _token("bob")


def _acp_run(token: str, text: str, session_id: str) -> Any:
    body = {"agent_name": "echo", "mode": "sync", "input": [{"parts": [{"content": text}]}], "session_id": session_id}
    return Client().post("/acp/runs", json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}")


def _acp_session(token: str, session_id: str) -> Any:
    return Client().get(f"/acp/sessions/{session_id}", HTTP_AUTHORIZATION=f"Bearer {token}")


def _inputs(response: Any) -> list[str]:
    return [Client().get(url).json()["parts"][0]["content"] for url in response.json()["history"][::2]]


def test_acp_another_users_session_id_is_a_new_session_of_ones_own(tokens: tuple[str, str]) -> None:
    ada, bob = tokens
    shared = str(uuid.uuid4())
    first = _acp_run(ada, "Ada's secret", shared)
    assert first.status_code == 200 and first.json()["session_id"] == shared
    unknown = str(uuid.uuid4())
    # bob's answers are the same for ada's id and for an id nobody uses: no oracle
    for session_id in (shared, unknown):
        response = _acp_run(bob, "Bob here", session_id)
        assert response.status_code == 200, response.content
        assert (response.json()["status"], response.json()["session_id"]) == ("completed", session_id)
    assert _acp_run(ada, "Ada again", shared).status_code == 200
    assert _inputs(_acp_session(ada, shared)) == ["Ada's secret", "Ada again"]
    assert _inputs(_acp_session(bob, shared)) == ["Bob here"]  # bob's own session; ada's messages are not his
    assert _acp_session(ada, unknown).status_code == 404
    ada_thread = RobotResult.objects.get(input="Ada's secret").thread
    ada_runs = RobotResult.objects.filter(thread=ada_thread).order_by("sequence_number")
    assert list(ada_runs.values_list("input", flat=True)) == ["Ada's secret", "Ada again"]
    assert Thread.objects.filter(user__username="bob").count() == 2


def test_an_app_made_thread_keeps_its_id_for_its_owner_only(tokens: tuple[str, str]) -> None:
    ada, bob = tokens
    thread = Thread.objects.create(user=get_user_model().objects.get(username="ada"), robot_name="echo")
    assert _acp_run(ada, "On my chat thread", thread.session_id).json()["session_id"] == thread.session_id
    assert RobotResult.objects.filter(thread=thread).count() == 1  # the chat page's thread, continued over ACP
    assert _acp_run(bob, "Not on hers", thread.session_id).status_code == 200
    assert RobotResult.objects.filter(thread=thread).count() == 1


def _a2a(token: str, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return Client().post("/a2a/echo/", json.dumps(body), content_type="application/json",
                         HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_A2A_VERSION="1.0").json()


def _send(token: str, text: str, context_id: str) -> Any:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}], "contextId": context_id}
    return _a2a(token, "SendMessage", {"message": message})


def test_a2a_another_users_context_id_is_a_new_context_of_ones_own(tokens: tuple[str, str]) -> None:
    ada, bob = tokens
    ada_task = _send(ada, "Ada's secret", "ctx-shared")["result"]["task"]
    assert ada_task["contextId"] == "ctx-shared"
    for context_id in ("ctx-shared", "ctx-unused"):
        bob_task = _send(bob, "Bob here", context_id)["result"]["task"]
        assert (bob_task["contextId"], bob_task["status"]["state"]) == (context_id, "TASK_STATE_COMPLETED")
    listed = _a2a(bob, "ListTasks", {"contextId": "ctx-shared"})["result"]["tasks"]
    assert [task["history"][0]["parts"][0]["text"] for task in listed] == ["Bob here"]
    listed = _a2a(ada, "ListTasks", {"contextId": "ctx-shared"})["result"]["tasks"]
    assert [task["id"] for task in listed] == [ada_task["id"]]
    again = _send(ada, "Ada again", "ctx-shared")["result"]["task"]
    assert RobotResult.objects.get(run_id=again["id"].replace("-", "")).thread_id == RobotResult.objects.get(
        run_id=ada_task["id"].replace("-", "")).thread_id


PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def test_a_sessions_history_holds_each_runs_input_with_its_files_and_its_reply(tokens: tuple[str, str]) -> None:
    ada, _bob = tokens
    session = str(uuid.uuid4())
    image = {"content_type": "image/png", "content": PNG_B64, "content_encoding": "base64", "name": "dot.png"}
    body = {"agent_name": "echo", "mode": "sync", "input": [{"parts": [image]}], "session_id": session}
    run = Client().post("/acp/runs", json.dumps(body), content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {ada}").json()
    assert run["status"] == "completed"
    _acp_run(ada, "And this?", session)
    history = [Client().get(url).json() for url in _acp_session(ada, session).json()["history"]]
    assert [message["role"] for message in history] == ["user", "agent", "user", "agent"]
    assert history[0]["parts"] == [{"content_type": "image/png", "name": "dot.png", "content": PNG_B64,
                                    "content_encoding": "base64"}]
    assert history[1]["parts"][0]["content"] == run["output"][0]["parts"][0]["content"]
    assert history[2]["parts"][0]["content"] == "And this?"
