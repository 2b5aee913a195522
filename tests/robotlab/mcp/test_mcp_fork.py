"""MCP sessions in a forked child: the child opens its own, the parent's keeps working.

A child inherits the parent's connections, but their sessions live on the parent's loop thread
(absent in the child) and talk to the parent's server processes. Without the at-fork reset the
child's first request never returns (here: times out); with it, the child starts its own server.
"""

from __future__ import annotations

from typing import Any

from robotlab.mcp import ConnectionPoller, MCPClient, content_text, get_manager
from tests.robotlab.forking import run_in_fork


def test_a_forked_child_opens_its_own_stdio_session(stdio_config: dict[str, Any], child_pids: Any) -> None:
    client = MCPClient(stdio_config).connect()
    try:
        assert client.error is None
        parent_server = int(content_text(client.call_tool("pid", {})))
        assert parent_server in child_pids()

        def child() -> str:
            server = int(content_text(client.call_tool("pid", {})))
            echo = content_text(client.call_tool("echo", {"text": "from the child"}))
            get_manager().run_sync(get_manager().close_all(), timeout=30)
            return f"own-server={server != parent_server} {echo}"

        assert run_in_fork(child, timeout=60) == "own-server=True echo: from the child"
        assert int(content_text(client.call_tool("pid", {}))) == parent_server  # the parent's session is intact
        assert content_text(client.call_tool("add", {"a": 2, "b": 3})) == "5"
    finally:
        client.disconnect()


def test_a_poller_started_before_the_fork_is_stopped_in_the_child(stdio_config: dict[str, Any]) -> None:
    poller = ConnectionPoller().start()
    client = MCPClient(stdio_config, poller=poller).connect()
    try:
        assert poller.clients == [client]

        def child() -> str:
            stopped = not poller.is_running and poller.clients == []
            poller.start()
            answer = content_text(client.call_tool("add", {"a": 1, "b": 2}))
            poller.stop()
            return f"stopped={stopped} {answer}"

        assert run_in_fork(child, timeout=60) == "stopped=True 3"
        assert poller.is_running
        assert content_text(client.call_tool("add", {"a": 20, "b": 22})) == "42"
    finally:
        client.disconnect()
        poller.stop()
