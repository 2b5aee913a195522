"""The MCP endpoint's parts in process: who a token is, what its scopes reach, a question as a form, a settled run
as a result, the host check. The official client against daphne is in tests/example_project/test_mcp.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from robotlab_django.models import RobotResult

pytest.importorskip("mcp.server")
import mcp_types as types  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from robotlab_django.mcp import auth, tools  # noqa: E402
from robotlab_django.mcp.asgi import MCPEndpoint, mcp_router  # noqa: E402
from robotlab_django.protocols import tokens  # noqa: E402


@pytest.mark.django_db
def test_a_robotlab_token_reaches_every_robot_and_a_bad_or_revoked_one_nothing() -> None:
    user = get_user_model().objects.create_user("ada", password="pw")
    row, token = tokens.issue_token(user)
    verifier = auth.RobotLabTokenVerifier()
    access = verifier._verify(token)
    assert access is not None and access.subject == str(user.pk) and set(access.scopes) == {"mcp", "robots"}
    assert verifier._verify(token + "x") is None and verifier._verify("not-ours") is None
    tokens.revoke(row)
    assert verifier._verify(token) is None


def test_scopes_reach_every_robot_or_the_named_ones() -> None:
    names = ["chat", "concierge", "support"]
    assert auth.allowed_agents(frozenset({"mcp", "robots"}), names) == frozenset(names)
    assert auth.allowed_agents(frozenset({"mcp", "robot:chat", "robot:nobody"}), names) == {"chat"}
    assert auth.allowed_agents(frozenset({"mcp"}), names) == frozenset()


def test_a_question_is_a_one_field_form_and_its_answer_is_read_back() -> None:
    question = RobotResult(run_id="r1", status="awaiting", question={"question": "Which plan?", "choices": ["a", "b"]})
    request = tools.question_request(question)
    assert request.params.message == "Which plan?\n1. a\n2. b"
    assert request.params.requested_schema["properties"]["answer"]["enum"] == ["a", "b"]
    approval = RobotResult(run_id="r2", status="awaiting", question={"type": "approval", "tool": "delete",
                                                                     "question": "Approve delete?"})
    assert tools.question_request(approval).params.requested_schema["properties"]["answer"]["enum"] == [
        "approve", "deny"]
    result = tools.call_result(question)
    assert isinstance(result, types.InputRequiredResult) and result.request_state == "r1"
    assert tools.answer_from({"answer": types.ElicitResult(action="accept", content={"answer": "b"})}) == "b"
    for responses, said in ((None, "send inputResponses"),
                            ({"answer": types.ElicitResult(action="decline")}, "The form was decline"),
                            ({"answer": types.ElicitResult(action="accept", content={"answer": None})}, "a string")):
        with pytest.raises(MCPError, match=said) as raised:
            tools.answer_from(responses)
        assert raised.value.error.code == types.INVALID_PARAMS


def test_a_settled_run_is_its_reply_or_a_tool_error() -> None:
    done = tools.call_result(RobotResult(status="completed", reply="Hi."))
    assert isinstance(done, types.CallToolResult) and not done.is_error and done.content[0].text == "Hi."
    cancelled = tools.call_result(RobotResult(status="cancelled", reply="Hi"))
    assert isinstance(cancelled, types.CallToolResult) and cancelled.is_error
    failed = tools.call_result(RobotResult(status="failed", error="boom", error_type="RuntimeError"))
    assert isinstance(failed, types.CallToolResult) and failed.is_error and failed.content[0].text == "boom"
    provider = tools.call_result(RobotResult(status="failed", error="429 key sk-secret", error_type="InferenceError",
                                             error_kind="rate_limit"))
    assert isinstance(provider, types.CallToolResult) and provider.is_error
    assert provider.content[0].text and "sk-secret" not in provider.content[0].text  # the public wording


def _call(app: Any, path: str, host: bytes) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "headers": [(b"host", host)]}
    asyncio.run(app(scope, receive, send))
    return sent


def test_other_paths_go_to_django_and_a_host_outside_allowed_hosts_is_refused() -> None:
    seen: list[str] = []

    async def django(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["path"])

    app = mcp_router(django, MCPEndpoint(prefix="/mcp/"))
    assert _call(app, "/a2a/", b"evil.example") == [] and seen == ["/a2a/"]
    refused = _call(app, "/mcp/", b"evil.example")
    assert refused[0]["status"] == 400 and b"ALLOWED_HOSTS" in refused[1]["body"]
    unauthorized = _call(app, "/mcp/", b"testserver")  # the SDK's app: no token
    assert unauthorized[0]["status"] == 401 and seen == ["/a2a/"]
