"""MCP tool calls are execute_tool spans under the robot's invoke_agent, failures included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

import robotlab
from robotlab.testing import FakeLLM, text, tool_call
from tests.robotlab.spans import Recorder, parent_of, recording, span_id


@pytest.fixture
def spans() -> Iterator[Recorder]:
    with recording() as recorder:
        yield recorder


async def test_mcp_tool_call_is_an_execute_tool_span(fixture_server: Any, spans: Recorder) -> None:
    llm = FakeLLM([tool_call("add", id="call_add", a=19, b=23), tool_call("fail", reason="no"), text("It is 42.")])
    robot = robotlab.build(name="calc", model="openai/gpt-4o-mini", llm=llm, mcp_servers=[fixture_server])
    try:
        assert (await robot.arun("What is 19 + 23?")).reply == "It is 42."
    finally:
        await robot.adisconnect()
    agent = spans.one("invoke_agent calc")
    add = spans.one("execute_tool add")
    fail = spans.one("execute_tool fail")
    assert parent_of(add) == span_id(agent) and parent_of(fail) == span_id(agent)
    assert add.attributes is not None
    assert add.attributes["gen_ai.tool.name"] == "add"
    assert add.attributes["gen_ai.tool.call.id"] == "call_add"
    assert add.attributes["gen_ai.tool.type"] == "extension"
    assert add.attributes["robotlab.mcp.server"] == "fixture"
    assert add.status.status_code is StatusCode.UNSET
    assert fail.status.status_code is StatusCode.ERROR
    assert fail.attributes is not None and fail.attributes["error.type"] == "robotlab.errors.MCPError"
    assert "failed on server 'fixture'" in (fail.status.description or "")
