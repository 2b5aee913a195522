"""A small MCP server for the tests, on the SDK's MCPServer: tools, a resource and a prompt.

Run as a script it serves stdio (``python mcp_fixture_server.py``); the tests also use
``SERVER`` in process and over streamable HTTP.
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer

SERVER = MCPServer("fixture", description="Arithmetic and echo tools for tests")


@SERVER.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@SERVER.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@SERVER.tool()
def fail(reason: str = "broken") -> str:
    """Always fails on the server side."""
    raise ValueError(f"server-side failure: {reason}")


@SERVER.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@SERVER.tool()
async def nap(seconds: float) -> str:
    """Sleep, then answer (for timeouts)."""
    await anyio.sleep(seconds)
    return "awake"


@SERVER.resource("note://greeting", description="A greeting")
def greeting() -> str:
    """A short greeting."""
    return "hello, resource"


@SERVER.prompt()
def review(topic: str) -> str:
    """Ask for a review of a topic."""
    return f"Please review {topic}."


if __name__ == "__main__":
    SERVER.run("stdio")
