"""Robots and networks served as MCP servers, called from the SDK's own client."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

import robotlab
from robotlab.mcp import BackgroundHTTPServer, MCPClient, create_server
from robotlab.mcp.server import main, reply_text
from robotlab.network import Network
from robotlab.testing import FakeLLM, raise_, text, tool_call

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def greeter(reply: str = "Hello from the greeter.") -> Any:
    return robotlab.build(
        name="greeter",
        description="Greets people",
        system_prompt="You greet warmly.",
        llm=FakeLLM(default=text(reply)),
    )


async def test_robot_as_a_tool_in_process() -> None:
    robot = greeter()
    async with Client(create_server(robot)) as client:
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == ["greeter"]
        assert tools[0].description == "Greets people"
        assert tools[0].input_schema["required"] == ["message"]
        result = await client.call_tool("greeter", {"message": "Hi, I am Ada"})
        assert not result.is_error
        assert result.content[0].text == "Hello from the greeter."
    assert robot.messages[0] == {"role": "user", "content": "Hi, I am Ada"}


async def test_robot_over_streamable_http() -> None:
    with BackgroundHTTPServer(create_server(greeter("Hi over HTTP"))) as http:
        assert http.url.startswith("http://127.0.0.1:") and http.url.endswith("/mcp")
        async with Client(http.url) as client:
            result = await client.call_tool("greeter", {"message": "hello"})
            assert result.content[0].text == "Hi over HTTP"


async def test_robot_over_stdio_from_the_command_line() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "robotlab.mcp.server", "mcp_fixture_robots:echo", "--prompts"],
        env=env,
        cwd=str(ROOT),
    )
    async with Client(params) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
        result = await client.call_tool("echo", {"message": "anyone there?"})
        assert result.content[0].text == "hello from the echo robot"
        prompt = await client.get_prompt("echo", {"message": "hi"})
        assert prompt.messages[0].content.text == "You greet.\n\nhi"


async def test_robot_as_a_prompt() -> None:
    async with Client(create_server(greeter(), prompts=True, tools=False)) as client:
        assert (await client.list_tools()).tools == []
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["greeter"]
        rendered = await client.get_prompt("greeter", {"message": "Say hi to Bob"})
        assert rendered.messages[0].role == "user"
        assert rendered.messages[0].content.text == "You greet warmly.\n\nSay hi to Bob"


async def test_a_failing_robot_is_a_tool_error() -> None:
    robot = robotlab.build(name="broken", llm=FakeLLM([raise_(RuntimeError("model is down"))]))
    async with Client(create_server(robot)) as client:
        result = await client.call_tool("broken", {"message": "hi"})
        assert result.is_error
        assert result.content[0].text == "Error executing tool broken: RuntimeError: model is down"


async def test_factories_build_a_fresh_robot_per_call() -> None:
    built: list[Any] = []

    def factory() -> Any:
        robot = greeter("fresh")
        built.append(robot)
        return robot

    async with Client(create_server(factory)) as client:
        for _ in range(2):
            assert (await client.call_tool("greeter", {"message": "hi"})).content[0].text == "fresh"
    assert len(built) == 3  # one to learn the name, one per call
    assert all(len(r.messages) == 2 for r in built[1:])


async def test_network_as_a_tool() -> None:
    network = Network(name="team")
    network.task(
        "write", robotlab.build(name="writer", llm=FakeLLM(default=text("drafted"))), depends_on="none"
    )
    async with Client(create_server(network)) as client:
        tool = (await client.list_tools()).tools[0]
        assert (tool.name, tool.description) == ("team", "Ask the network 'team'.")
        assert (await client.call_tool("team", {"message": "go"})).content[0].text == "drafted"


async def test_robot_served_over_mcp_is_used_by_another_robot() -> None:
    with BackgroundHTTPServer(create_server(greeter("Greetings, Ada!"))) as http:
        llm = FakeLLM([tool_call("greeter", message="greet Ada"), text("The greeter says: Greetings, Ada!")])
        host = robotlab.build(
            name="host",
            llm=llm,
            mcp=[{"name": "robots", "transport": {"type": "streamable-http", "url": http.url}}],
        )
        try:
            assert (await host.arun("Have Ada greeted")).reply == "The greeter says: Greetings, Ada!"
            assert llm.requests[1].messages[-1]["content"] == "Greetings, Ada!"
            assert host.mcp_tools[0].mcp == "robots"
        finally:
            await host.adisconnect()


def test_create_server_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="share the MCP name greeter"):
        create_server(greeter(), [greeter()])
    with pytest.raises(TypeError, match="Cannot serve 42"):
        create_server(42)


def test_reply_text() -> None:
    class Flow:
        value = type("R", (), {"reply": "from a network"})()

    assert reply_text(Flow()) == "from a network"
    assert reply_text(None) == ""
    assert reply_text("plain") == "plain"


def test_command_line_rejects_a_bad_target() -> None:
    with pytest.raises(SystemExit, match="module:attribute"):
        main(["no_colon_here"])


def test_mcp_client_sees_served_robots() -> None:
    with BackgroundHTTPServer(create_server(greeter("sync hello"))) as http:
        client = MCPClient({"name": "robots", "transport": {"type": "http", "url": http.url}}).connect()
        try:
            assert client.call_tool("greeter", {"message": "hi"}) == [{"type": "text", "text": "sync hello"}]
        finally:
            client.disconnect()
