"""28 - MCP server discovery: connect only the servers a message is about.

``ServerDiscovery.select(query, from_=servers)`` scores each server's ``"<name> <description>"`` against the
query (stemmed term-frequency cosine similarity) and keeps those at or above the threshold; when it cannot
decide (no descriptions, a blank query, nothing over the threshold) it keeps every server, so discovery
only ever narrows. A robot built with ``mcp_discovery=True`` applies it to its first message: here it
starts the time server and never tries to start the (missing) GitHub and filesystem servers.

The robot part uses the ``mcp-server-time`` server (``pip install mcp-server-time``) and is skipped when
it is not installed.

Run it: ``python examples/28_mcp_discovery.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from _offline import llm

import robotlab
from robotlab.mcp import ServerDiscovery
from robotlab.testing import tool_call

time_command = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")
SERVERS: list[dict[str, Any]] = [
    {"name": "filesystem", "description": "Read, write, and search local files and directories",
     "transport": {"type": "stdio", "command": "mcp-server-filesystem-not-installed"}},
    {"name": "github", "description": "GitHub repositories, issues, pull requests and code search",
     "transport": {"type": "stdio", "command": "mcp-server-github-not-installed"}},
    {"name": "time", "description": "Current time and timezone conversion", "timeout": 60,
     "transport": {"type": "stdio", "command": time_command, "args": ["--local-timezone", "UTC"]}},
]


def names(servers: list[dict[str, Any]]) -> list[str]:
    return [server["name"] for server in servers]


for query in ("list the open pull requests on my repo", "what time is it in Tokyo?", "search my files for TODO"):
    scores = {s["name"]: round(ServerDiscovery.score(query, s), 3) for s in SERVERS}
    print(f"{query!r}: scores {scores} -> {names(ServerDiscovery.select(query, from_=SERVERS))}")

print("fallbacks, every server is kept:")
undescribed = [{k: v for k, v in s.items() if k != "description"} for s in SERVERS]
print(f"  no descriptions:    {names(ServerDiscovery.select('pull requests', from_=undescribed))}")
print(f"  blank query:        {names(ServerDiscovery.select('   ', from_=SERVERS))}")
print(f"  nothing over 0.05:  {names(ServerDiscovery.select('bake a lemon cake', from_=SERVERS))}")
print(f"  a high threshold:   {names(ServerDiscovery.select('time', from_=SERVERS, threshold=0.99))}")

if not Path(time_command).exists():
    print("mcp-server-time is not installed: skipping the robot (pip install mcp-server-time)")
    sys.exit(0)

robot = robotlab.build(name="assistant", mcp_servers=SERVERS, mcp_discovery=True,
                       llm=llm(tool_call("get_current_time", timezone="Asia/Tokyo"), "Here is Tokyo's time."))
try:
    result = robot.run("What time is it in Tokyo?")
    print(f"robot connected: {sorted(robot.mcp_clients)}; failed: {robot.failed_mcp_server_names}")
    print(f"its MCP tools: {sorted(t.name for t in robot.mcp_tools)}; reply: {result.reply}")
finally:
    robot.disconnect()
