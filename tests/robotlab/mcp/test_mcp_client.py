"""MCPClient over the SDK: in process, stdio, streamable HTTP and a published server; bad input."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from robotlab.errors import MCPError
from robotlab.mcp import (
    BackgroundHTTPServer,
    ConnectionPoller,
    MCPClient,
    ServerConfig,
    content_text,
    get_manager,
)


def stdio_command(code: str, *, timeout: float = 5) -> dict[str, Any]:
    return {
        "name": "broken",
        "timeout": timeout,
        "transport": {"type": "stdio", "command": sys.executable, "args": ["-c", code]},
    }


async def test_in_process_tools_resources_prompts(fixture_server: Any) -> None:
    client = await MCPClient(fixture_server).aconnect()
    try:
        assert client.is_connected and client.error is None
        tools = {t["name"]: t for t in await client.alist_tools()}
        assert {"add", "echo", "fail", "pid", "nap"} <= set(tools)
        assert tools["add"]["inputSchema"]["required"] == ["a", "b"]
        assert tools["add"]["description"] == "Add two integers."
        assert content_text(await client.acall_tool("add", {"a": 2, "b": 40})) == "42"
        resources = await client.alist_resources()
        assert [r["uri"] for r in resources] == ["note://greeting"]
        contents = await client.aread_resource("note://greeting")
        assert contents[0]["text"] == "hello, resource"
        prompts = await client.alist_prompts()
        assert [p["name"] for p in prompts] == ["review"]
        prompt = await client.aget_prompt("review", {"topic": "the plan"})
        assert prompt["messages"][0]["content"]["text"] == "Please review the plan."
    finally:
        await client.adisconnect()
    assert not client.is_connected


def test_sync_api_from_plain_code(fixture_server: Any) -> None:
    client = MCPClient(fixture_server).connect()
    try:
        assert [t["name"] for t in client.list_tools()][:2] == ["add", "echo"]
        assert client.call_tool("echo", {"text": "hi"}) == [{"type": "text", "text": "echo: hi"}]
        assert client.read_resource("note://greeting")[0]["text"] == "hello, resource"
        assert client.list_prompts()[0]["name"] == "review"
        assert client.get_prompt("review", {"topic": "x"})["messages"][0]["role"] == "user"
        assert client.list_resources()[0]["name"]
        assert client.to_dict()["connected"] is True
    finally:
        client.disconnect()
    assert client.to_dict() == {"server": client.server.to_dict(), "connected": False}


async def test_not_connected_error(fixture_server: Any) -> None:
    client = MCPClient(fixture_server)
    with pytest.raises(MCPError) as info:
        await client.alist_tools()
    assert str(info.value) == "Not connected to MCP server: fixture"


def test_invalid_config() -> None:
    with pytest.raises(TypeError, match="^Invalid server config$"):
        MCPClient(3.14)


async def test_tool_error_on_the_server_side(fixture_server: Any) -> None:
    client = await MCPClient(fixture_server).aconnect()
    try:
        with pytest.raises(MCPError) as info:
            await client.acall_tool("fail", {"reason": "disk full"})
        assert str(info.value).startswith("MCP tool 'fail' failed on server 'fixture': ")
        assert "disk full" in str(info.value) or "Error executing tool fail" in str(info.value)
        assert content_text(await client.acall_tool("add", {"a": 1, "b": 1})) == "2"  # still usable
    finally:
        await client.adisconnect()


async def test_stdio_subprocess(stdio_config: dict[str, Any], child_pids: Any) -> None:
    client = await MCPClient(stdio_config).aconnect()
    assert client.error is None
    try:
        pid = int(content_text(await client.acall_tool("pid")))
        assert pid in child_pids()
        assert content_text(await client.acall_tool("echo", {"text": "over stdio"})) == "echo: over stdio"
    finally:
        await client.adisconnect()
    assert pid not in child_pids()


async def test_streamable_http(http_url: str) -> None:
    client = await MCPClient(
        {
            "name": "web",
            "transport": {
                "type": "streamable-http",
                "url": http_url,
                "headers": {"X-Test": "1"},
                "auth_provider": lambda: "Bearer t",
            },
        }
    ).aconnect()
    try:
        assert client.error is None
        assert content_text(await client.acall_tool("add", {"a": 20, "b": 22})) == "42"
        assert (await client.aread_resource("note://greeting"))[0]["text"] == "hello, resource"
    finally:
        await client.adisconnect()


async def test_http_nobody_listening() -> None:
    client = await MCPClient(
        {"name": "gone", "timeout": 5, "transport": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}
    ).aconnect()
    assert not client.is_connected
    assert isinstance(client.error, MCPError)
    assert str(client.error).startswith("Cannot connect to MCP server 'gone' (http://127.0.0.1:9/mcp): ")


async def test_websocket_is_not_supported() -> None:
    client = await MCPClient(
        {"name": "sock", "transport": {"type": "ws", "url": "ws://127.0.0.1:9"}}
    ).aconnect()
    assert str(client.error).startswith("Unsupported transport type: ws")


# -- bad input: each failure is an MCPError with RobotLab's wording, and no process is left -------------


async def test_command_not_found(caplog_robotlab: Any) -> None:
    client = await MCPClient(
        {"name": "ghost", "transport": {"type": "stdio", "command": "/nonexistent/mcp-ghost"}}
    ).aconnect()
    assert not client.is_connected
    assert str(client.error).startswith("MCP server command not found: /nonexistent/mcp-ghost (")
    assert "MCP connection failed for ghost: MCP server command not found" in caplog_robotlab.text


async def test_server_that_exits_at_once() -> None:
    client = await MCPClient(stdio_command("pass")).aconnect()
    assert str(client.error) == f"MCP server process exited immediately (command: {sys.executable})"


async def test_server_that_never_answers(child_pids: Any) -> None:
    before = child_pids()
    client = await MCPClient(stdio_command("import time; time.sleep(120)", timeout=1)).aconnect()
    assert str(client.error) == f"MCP server '{sys.executable}' did not respond within 1s"
    assert client.error is not None and client.error.retryable
    assert child_pids() <= before


async def test_request_timeout(fixture_server: Any) -> None:
    client = await MCPClient(ServerConfig.in_process(fixture_server, name="sleepy", timeout=1)).aconnect()
    try:
        with pytest.raises(MCPError) as info:
            await client.acall_tool("nap", {"seconds": 3})
        assert str(info.value) == "MCP server did not respond within 1s"
        assert info.value.retryable
    finally:
        await client.adisconnect()


async def test_lost_stdio_server_is_reconnected(stdio_config: dict[str, Any]) -> None:
    client = await MCPClient(stdio_config).aconnect()
    try:
        first = int(content_text(await client.acall_tool("pid")))
        os.kill(first, signal.SIGKILL)
        with pytest.raises(MCPError) as info:
            await client.acall_tool("pid")
        assert str(info.value).startswith("MCP server connection lost: ")
        assert info.value.retryable
        second = int(content_text(await client.acall_tool("pid")))  # opened again on the next request
        assert second != first
    finally:
        await client.adisconnect()


# -- sharing ------------------------------------------------------------------------------------------


async def test_equal_configs_share_one_session(stdio_config: dict[str, Any]) -> None:
    one = await MCPClient(stdio_config).aconnect()
    two = await MCPClient(dict(stdio_config)).aconnect()
    try:
        assert one.connection is two.connection
        assert one.call_tool is not two.call_tool
        pids = {content_text(await c.acall_tool("pid")) for c in (one, two)}
        assert len(pids) == 1
        await one.adisconnect()
        assert content_text(await two.acall_tool("add", {"a": 1, "b": 2})) == "3"  # still open for two
    finally:
        await one.adisconnect()
        await two.adisconnect()
    assert get_manager().connections == []


def test_sync_threads_and_event_loops_share_the_session(stdio_config: dict[str, Any]) -> None:
    client = MCPClient(stdio_config).connect()
    results: list[str] = []
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            if n % 2:
                results.append(content_text(client.call_tool("add", {"a": n, "b": 0})))
            else:
                results.append(content_text(asyncio.run(client.acall_tool("add", {"a": n, "b": 0}))))
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not errors
        assert sorted(results, key=int) == [str(n) for n in range(8)]
        assert len(get_manager().connections) == 1
    finally:
        client.disconnect()


# -- the poller ---------------------------------------------------------------------------------------


def test_connection_poller(stdio_config: dict[str, Any], fixture_server: Any) -> None:
    poller = ConnectionPoller()
    assert ConnectionPoller.POLL_INTERVAL == 0.1
    assert not poller.is_running
    assert poller.start() is poller and poller.start() is poller
    assert poller.is_running
    assert poller.thread is not None and poller.thread.name == "RobotLab::MCP::ConnectionPoller"
    client = MCPClient(stdio_config, poller=poller).connect()
    other = MCPClient(fixture_server, poller=poller).connect()
    try:
        assert poller.clients == [client]  # only stdio clients register
        assert client.connection is not None and client.connection.manager is poller
        result = poller.send_request(
            client,
            {"method": "tools/call", "params": {"name": "add", "arguments": {"a": 3, "b": 4}}},
            timeout=10,
        )
        assert result["content"][0]["text"] == "7"
        assert content_text(client.call_tool("echo", {"text": "p"})) == "echo: p"
        with pytest.raises(MCPError) as info:
            poller.send_request(
                client,
                {"method": "tools/call", "params": {"name": "nap", "arguments": {"seconds": 3}}},
                timeout=1,
            )
        assert str(info.value) == "MCP server did not respond within 1s"
        assert info.value.retryable
        poller.unregister(other)
        poller.unregister(client)
        assert poller.clients == []
        poller.register(client)
    finally:
        other.disconnect()
    failures: list[BaseException] = []

    def pending() -> None:
        try:
            poller.send_request(
                client,
                {"method": "tools/call", "params": {"name": "nap", "arguments": {"seconds": 30}}},
                timeout=60,
            )
        except BaseException as exc:
            failures.append(exc)

    waiter = threading.Thread(target=pending)
    waiter.start()
    tick = threading.Event()
    for _ in range(3000):  # until the request is in flight (at most 30 s)
        if poller._pending:
            break
        tick.wait(0.01)
    assert poller._pending
    assert poller.stop() is poller and poller.stop() is poller
    waiter.join(30)
    assert [str(f) for f in failures] == ["ConnectionPoller stopped"]
    assert not poller.is_running


# -- a server this project did not write -----------------------------------------------------------------

TIME_SERVER = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")


@pytest.mark.skipif(not Path(TIME_SERVER).exists(), reason="mcp-server-time is not installed")
async def test_published_time_server() -> None:
    client = await MCPClient(
        {
            "name": "time",
            "timeout": 60,
            "transport": {"type": "stdio", "command": TIME_SERVER, "args": ["--local-timezone", "UTC"]},
        }
    ).aconnect()
    try:
        assert client.error is None
        assert {"get_current_time", "convert_time"} <= {t["name"] for t in await client.alist_tools()}
        answer = content_text(await client.acall_tool("get_current_time", {"timezone": "Europe/Paris"}))
        assert '"timezone": "Europe/Paris"' in answer
    finally:
        await client.adisconnect()


async def test_sse_for_older_servers(fixture_server: Any) -> None:
    with BackgroundHTTPServer(fixture_server, transport="sse") as http:
        assert http.url.endswith("/sse")
        client = await MCPClient({"name": "old", "transport": {"type": "sse", "url": http.url}}).aconnect()
        try:
            assert client.error is None
            assert content_text(await client.acall_tool("add", {"a": 5, "b": 6})) == "11"
        finally:
            await client.adisconnect()


def test_background_server_rejects_unknown_transport(fixture_server: Any) -> None:
    with pytest.raises(ValueError, match="Unknown MCP transport 'ws'"):
        BackgroundHTTPServer(fixture_server, transport="ws")
