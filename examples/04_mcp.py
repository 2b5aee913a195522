"""04 - MCP: use the tools of a Model Context Protocol server.

Part 1 talks to a server directly with ``robotlab.mcp.MCPClient`` (list its tools, call one). Part 2 gives a
robot the same server with ``mcp_servers=``: the robot starts it on its first run, and every tool the
server lists becomes one of the robot's tools.

The server is ``mcp-server-time`` (https://pypi.org/project/mcp-server-time/, in the project's ``dev``
extra: ``pip install mcp-server-time``), started as a child process over stdio. It needs no network.

Run it: ``python examples/04_mcp.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from _offline import llm

import robotlab
from robotlab.mcp import MCPClient, content_text
from robotlab.testing import tool_call

command = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
if not Path(command).exists():
    sys.exit("This example needs the mcp-server-time MCP server: pip install mcp-server-time")

time_server = {
    "name": "time",
    "description": "Current time in any timezone, and conversions between timezones",
    "timeout": 60,
    "transport": {"type": "stdio", "command": command, "args": ["--local-timezone", "UTC"]},
}

print("Part 1: the client on its own")
client = MCPClient(time_server).connect()
if client.error is not None:
    sys.exit(f"could not start the time server: {client.error}")
try:
    for spec in client.list_tools():
        print(f"  tool {spec['name']}: {spec['description'].splitlines()[0]}")
    answer = content_text(client.call_tool("convert_time", {
        "source_timezone": "Europe/Paris", "time": "09:30", "target_timezone": "Asia/Tokyo",
    }))
    target = json.loads(answer)["target"]
    print(f"  convert_time 09:30 Paris -> Tokyo: {target['datetime']} ({target['day_of_week']})")
finally:
    client.disconnect()

print("Part 2: a robot with the server's tools")
robot = robotlab.build(
    name="clock",
    system_prompt="You answer questions about time with the time tools.",
    mcp_servers=[time_server],
    llm=llm(tool_call("get_current_time", timezone="Asia/Tokyo"), "The time server says what time it is in Tokyo."),
)
try:
    result = robot.run("What time is it in Tokyo right now?")
    print(f"  MCP tools: {sorted(t.name for t in robot.mcp_tools)}")
    for tool_result in result.tool_calls:
        try:
            now = json.loads(str(tool_result.data))
            shown = f"{now['datetime']} ({now['timezone']})"
        except (ValueError, KeyError, TypeError):  # an error text, when the model sent a bad timezone
            shown = str(tool_result.data or tool_result.error).splitlines()[0]
        print(f"  {tool_result.tool.name}{tool_result.tool.input} -> {shown}")
    print(f"  clock: {result.reply}")
finally:
    robot.disconnect()
