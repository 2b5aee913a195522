"""Robots using MCP servers: lazy connect, tools reach the model, failures skipped and retried."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import robotlab
from robotlab import RunConfig
from robotlab.errors import ConfigurationError, MCPError
from robotlab.mcp import MCPClient, ServerConfig, discover_tools, get_manager
from robotlab.testing import FakeLLM, text, tool_call

HERE = Path(__file__).resolve().parent
TIME_SERVER = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")


def tool_names(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.tools]


def tool_reply(llm: FakeLLM, index: int = 1) -> dict[str, Any]:
    message: dict[str, Any] = llm.requests[index].messages[-1]
    assert message["role"] == "tool"
    return message


async def test_in_process_server_tools_reach_the_model(fixture_server: Any) -> None:
    llm = FakeLLM([tool_call("add", a=19, b=23), text("It is 42.")])
    robot = robotlab.build(name="calc", llm=llm, mcp_servers=[fixture_server])
    try:
        assert robot.mcp_clients == {}  # lazy: nothing until the first run
        result = await robot.arun("What is 19 + 23?")
        assert result.reply == "It is 42."
        assert {"add", "echo", "fail"} <= set(tool_names(llm.requests[0]))
        assert tool_reply(llm)["content"] == "42"
        assert [t.mcp for t in robot.mcp_tools] == ["fixture"] * len(robot.mcp_tools)
        assert robot.mcp_client("fixture") is robot.mcp_clients["fixture"]
        assert robot.mcp_client("nope") is None
    finally:
        await robot.adisconnect()


def test_stdio_server_with_sync_run(stdio_config: dict[str, Any], child_pids: Any) -> None:
    llm = FakeLLM([tool_call("pid"), text("first"), tool_call("pid"), text("second")])
    robot = robotlab.build(name="stdio", llm=llm, mcp_servers=[stdio_config])
    try:
        robot.run("which process?")
        first = int(tool_reply(llm)["content"])
        assert first in child_pids()
        robot.run("and now?")  # the connection is kept between runs
        assert int(tool_reply(llm, 3)["content"]) == first
        assert len(get_manager().connections) == 1
    finally:
        robot.disconnect()
    assert first not in child_pids()
    assert robot.mcp_clients == {} and robot.mcp_tools == []


async def test_streamable_http_server(http_url: str) -> None:
    llm = FakeLLM([tool_call("echo", text="over http"), text("done")])
    robot = robotlab.build(
        name="web", llm=llm, mcp=[{"name": "web", "transport": {"type": "streamable-http", "url": http_url}}]
    )
    try:
        await robot.arun("echo please")
        assert tool_reply(llm)["content"] == "echo: over http"
    finally:
        await robot.adisconnect()


@pytest.mark.skipif(not Path(TIME_SERVER).exists(), reason="mcp-server-time is not installed")
def test_published_server_mcp_server_time() -> None:
    llm = FakeLLM([tool_call("get_current_time", timezone="Asia/Tokyo"), text("It is evening in Tokyo.")])
    config = {"name": "time", "timeout": 60, "transport": {"type": "stdio", "command": TIME_SERVER}}
    robot = robotlab.build(name="clock", llm=llm, mcp_servers=[config])
    try:
        assert robot.run("What time is it in Tokyo?").reply == "It is evening in Tokyo."
        assert {"get_current_time", "convert_time"} <= set(tool_names(llm.requests[0]))
        assert '"timezone": "Asia/Tokyo"' in tool_reply(llm)["content"]
    finally:
        robot.disconnect()


async def test_server_side_tool_error_reaches_the_model(fixture_server: Any) -> None:
    llm = FakeLLM([tool_call("fail", reason="disk full"), text("Sorry.")])
    robot = robotlab.build(name="oops", llm=llm, mcp_servers=[fixture_server])
    try:
        assert (await robot.arun("try it")).reply == "Sorry."
        assert tool_reply(llm)["content"].startswith(
            "Error (fail): MCP tool 'fail' failed on server 'fixture': "
        )
    finally:
        await robot.adisconnect()


def test_bad_servers_are_skipped_and_the_robot_keeps_working(
    stdio_config: dict[str, Any], child_pids: Any, caplog_robotlab: Any
) -> None:
    before = child_pids()
    python = sys.executable
    bad = [
        {"name": "missing", "transport": {"type": "stdio", "command": "/nonexistent/mcp-missing"}},
        {"name": "quitter", "transport": {"type": "stdio", "command": python, "args": ["-c", "pass"]}},
        {
            "name": "silent",
            "timeout": 1,
            "transport": {"type": "stdio", "command": python, "args": ["-c", "import time; time.sleep(120)"]},
        },
    ]
    llm = FakeLLM([tool_call("add", a=1, b=2), text("3")])
    robot = robotlab.build(name="sturdy", llm=llm, mcp_servers=[stdio_config, *bad])
    try:
        assert robot.run("add").reply == "3"
        assert tool_reply(llm)["content"] == "3"
        assert sorted(robot.failed_mcp_server_names) == ["missing", "quitter", "silent"]
        errors = {name: str(error) for name, error in robot.mcp.errors.items()}
        assert all(isinstance(e, MCPError) for e in robot.mcp.errors.values())
        assert errors["missing"].startswith("MCP server command not found: /nonexistent/mcp-missing (")
        assert errors["quitter"] == f"MCP server process exited immediately (command: {python})"
        assert errors["silent"] == f"MCP server '{python}' did not respond within 1s"
        assert list(robot.mcp_clients) == ["fixture"]
        assert "Robot 'sturdy' failed to connect to MCP server: missing" in caplog_robotlab.text
        assert (
            "MCP connection failed for quitter: MCP server process exited immediately" in caplog_robotlab.text
        )
    finally:
        robot.disconnect()
    assert child_pids() <= before


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"name": "invalid", "transport": {"type": "pigeon"}},
         "Robot 'sturdy': MCP server 'invalid' (entry 1) is invalid: Invalid transport type: pigeon. Must be one "
         "of: stdio, sse, ws, websocket, streamable-http, http. Fix its transport.type."),
        ({"name": "nocmd", "transport": {"type": "stdio"}},
         "Robot 'sturdy': MCP server 'nocmd' (entry 1) is invalid: StdIO transport requires :command. "
         "Fix its transport.command."),
        ({"name": "nourl", "transport": {"type": "streamable-http"}},
         "Robot 'sturdy': MCP server 'nourl' (entry 1) is invalid: Transport requires :url. Fix its transport.url."),
        ({"name": "bare"},
         "Robot 'sturdy': MCP server 'bare' (entry 1) is invalid: ServerConfig.__init__() missing 1 required "
         "keyword-only argument: 'transport'. Fix its transport: a dict with a 'type'."),
        ({"name": "ws", "transport": {"type": "websocket", "url": "ws://127.0.0.1:9/ws"}},
         "Robot 'sturdy': MCP server 'ws' (entry 1) uses transport.type 'websocket', which the MCP SDK has no "
         "client for. Serve it over 'streamable-http' (or 'sse' or 'stdio') instead."),
    ],
)
def test_a_server_entry_that_cannot_work_is_a_configuration_error_at_build(
    stdio_config: dict[str, Any], entry: dict[str, Any], message: str
) -> None:
    """Seed semantics: a bad entry fails the build naming the field; only a server that is down warns at run time."""
    with pytest.raises(ConfigurationError) as caught:
        robotlab.build(name="sturdy", llm=FakeLLM([text("x")]), mcp_servers=[stdio_config, entry])
    assert str(caught.value) == message
    assert caught.value.robot_name == "sturdy"
    with pytest.raises(ConfigurationError, match="MCP server 'nocmd'"):
        robotlab.build(name="sturdy", llm=FakeLLM([text("x")]), mcp=[{"name": "nocmd", "transport": {"type": "stdio"}}])


def test_failed_server_is_retried_on_a_later_run(tmp_path: Path, caplog_robotlab: Any) -> None:
    script = tmp_path / "late_server.py"
    config = {
        "name": "late",
        "timeout": 60,
        "transport": {"type": "stdio", "command": sys.executable, "args": [str(script)]},
    }
    llm = FakeLLM([text("no tools yet"), tool_call("echo", text="now"), text("there it is")])
    robot = robotlab.build(name="patient", llm=llm, mcp_servers=[config])
    try:
        robot.run("first")
        assert robot.failed_mcp_server_names == ["late"]
        assert llm.requests[0].tools == []
        shutil.copy(HERE / "mcp_fixture_server.py", script)
        robot.run("second")
        assert robot.failed_mcp_server_names == []
        assert tool_reply(llm, 2)["content"] == "echo: now"
        assert "Robot 'patient' retrying MCP server: late" in caplog_robotlab.text
        assert "Robot 'patient' successfully connected to MCP server 'late' on retry" in caplog_robotlab.text
    finally:
        robot.disconnect()


async def test_run_mcp_none_connects_nothing(fixture_server: Any) -> None:
    robot = robotlab.build(name="quiet", llm=FakeLLM([text("ok")]), mcp_servers=[fixture_server])
    await robot.arun("hi", mcp="none")
    assert robot.mcp_clients == {}
    assert get_manager().connections == []


async def test_run_tools_none_keeps_mcp_tools_from_the_model(fixture_server: Any) -> None:
    llm = FakeLLM([text("ok"), text("ok")])
    robot = robotlab.build(name="narrow", llm=llm, mcp_servers=[fixture_server])
    try:
        await robot.arun("hi", tools="none")
        assert llm.requests[0].tools == []
        assert robot.mcp_tools  # connected all the same
        await robot.arun("hi", tools=["echo"])
        assert tool_names(llm.requests[1]) == ["echo"]
    finally:
        await robot.adisconnect()


async def test_mcp_inherit_from_the_network_config(fixture_server: Any) -> None:
    llm = FakeLLM([text("ok")])
    robot = robotlab.build(name="member", llm=llm, mcp="inherit", tools="inherit")
    try:
        await robot.arun("hi", network_config=RunConfig(mcp=[fixture_server], tools=["add"]))
        assert tool_names(llm.requests[0]) == ["add"]
    finally:
        await robot.adisconnect()


async def test_local_tool_wins_a_name_clash(fixture_server: Any, caplog_robotlab: Any) -> None:
    @robotlab.tool
    def echo(text: str) -> str:
        """Local echo."""
        return f"local {text}"

    llm = FakeLLM([tool_call("echo", text="x"), text("ok")])
    robot = robotlab.build(name="clash", llm=llm, local_tools=[echo], mcp_servers=[fixture_server])
    try:
        await robot.arun("echo")
        assert tool_names(llm.requests[0]).count("echo") == 1
        assert tool_reply(llm)["content"] == "local x"
        assert "MCP tool 'echo' of server 'fixture' is skipped" in caplog_robotlab.text
    finally:
        await robot.adisconnect()


def test_connect_mcp_eagerly_and_disconnect_then_reconnect(
    stdio_config: dict[str, Any], child_pids: Any
) -> None:
    robot = robotlab.build(
        name="eager", llm=FakeLLM([tool_call("pid"), text("ok")]), mcp_servers=[stdio_config]
    )
    try:
        assert robot.connect_mcp() is robot
        assert list(robot.mcp_clients) == ["fixture"]
        first = int(robot.mcp_clients["fixture"].call_tool("pid")[0]["text"])
        assert robot.disconnect() is robot
        assert first not in child_pids()
        robot.run("again")  # a later run connects again
        assert robot.mcp_clients["fixture"].is_connected
    finally:
        robot.disconnect()


async def test_inject_mcp(fixture_server: Any) -> None:
    client = await MCPClient(fixture_server).aconnect()
    try:
        tools = await discover_tools(client)
        llm = FakeLLM([tool_call("add", a=2, b=2), text("4")])
        robot = robotlab.build(name="host", llm=llm, mcp_servers=[ServerConfig.in_process(fixture_server)])
        assert robot.inject_mcp(clients=[client], tools=tools) is robot
        await robot.arun("2+2")
        assert tool_reply(llm)["content"] == "4"
        assert robot.mcp_clients == {"fixture": client}
        assert len(get_manager().connections) == 1  # nothing connected again
    finally:
        await client.adisconnect()


def test_sync_and_async_callers_share_connections(stdio_config: dict[str, Any]) -> None:
    import asyncio

    llm = FakeLLM([tool_call("pid"), text("a"), tool_call("pid"), text("b")])
    robot = robotlab.build(name="both", llm=llm, mcp_servers=[stdio_config])
    try:
        robot.run("sync")
        asyncio.run(robot.arun("async"))
        assert tool_reply(llm)["content"] == tool_reply(llm, 3)["content"]
        assert len(get_manager().connections) == 1
    finally:
        robot.disconnect()
