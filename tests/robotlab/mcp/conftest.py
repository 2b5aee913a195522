"""Fixtures for the MCP tests: the fixture server's command, and a check that no child process leaks."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def child_pids() -> set[int]:
    """The live child processes of this process (from /proc)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return {p for p in pids if Path(f"/proc/{p}").exists() and "(Z)" not in _state(p)}


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1][:4]
    except OSError:
        return "(Z)"


@pytest.fixture(autouse=True)
def no_leaked_children() -> Iterator[None]:
    """Fail a test that leaves an MCP server process running (then stop it anyway)."""
    before = child_pids()
    yield
    leaked = child_pids() - before
    from robotlab.mcp.connections import get_manager

    open_connections = get_manager().connections
    get_manager().run_sync(get_manager().close_all(), timeout=30)
    assert not leaked, f"child processes outlived the test: {sorted(leaked)}"
    assert not open_connections, f"connections left open: {open_connections}"


@pytest.fixture
def stdio_config() -> dict[str, Any]:
    """The fixture server over stdio, as a robot's server config."""
    return {
        "name": "fixture",
        "description": "Arithmetic and echo tools for tests",
        "timeout": 60,
        "transport": {
            "type": "stdio",
            "command": sys.executable,
            "args": [str(HERE / "mcp_fixture_server.py")],
            "env": {"PYTHONPATH": str(ROOT)},
        },
    }


@pytest.fixture
def fixture_server() -> Any:
    """The fixture server object (served in process)."""
    sys.path.insert(0, str(HERE))
    try:
        import mcp_fixture_server
    finally:
        sys.path.remove(str(HERE))
    return mcp_fixture_server.SERVER


@pytest.fixture
def http_url(fixture_server: Any) -> Iterator[str]:
    """The fixture server on streamable HTTP at 127.0.0.1."""
    from robotlab.mcp import BackgroundHTTPServer

    with BackgroundHTTPServer(fixture_server) as http:
        yield http.url


@pytest.fixture(name="child_pids")
def child_pids_fixture() -> Any:
    """The function that lists this process's live children."""
    return child_pids


@pytest.fixture
def caplog_robotlab(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """caplog at INFO for the robotlab logger."""
    caplog.set_level(logging.INFO, logger="robotlab")
    return caplog


def run(coro: Any) -> Any:
    """Run a coroutine in a fresh loop (for tests that are sync on purpose)."""
    return asyncio.run(coro)
