"""``manage.py robotlab_mcp``: the registered robots as an MCP server."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from mcp import Client, StdioServerParameters

from robotlab.mcp import create_server
from robotlab.testing import FakeLLM, text
from robotlab_django.management.commands.robotlab_mcp import robot_factories


def test_list_prints_the_registered_robots() -> None:
    out = io.StringIO()
    call_command("robotlab_mcp", "--list", stdout=out)
    lines = out.getvalue().splitlines()
    assert "echo: Repeats things" in lines
    assert "calculator: Adds numbers" in lines


def test_unknown_robot_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="Unknown robot 'nobody'"):
        call_command("robotlab_mcp", "nobody", "--list")


async def test_registered_robot_answers_through_the_sdk_client(settings: Any) -> None:
    llm = FakeLLM([text("echoed through MCP")])
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
    server = create_server(*robot_factories(["echo"]))
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        assert [(t.name, t.description) for t in tools] == [("echo", "Repeats things")]
        result = await client.call_tool("echo", {"message": "hello"})
        assert result.content[0].text == "echoed through MCP"
    assert llm.requests[0].messages[-1] == {"role": "user", "content": "hello"}


async def test_command_serves_over_stdio() -> None:
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root), "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings"}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "django", "robotlab_mcp", "echo"], env=env, cwd=str(root)
    )
    async with Client(params) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
        result = await client.call_tool("echo", {"message": "hello"})
        assert not result.is_error
        assert result.content[0].text  # the offline demo model of the test settings answers
