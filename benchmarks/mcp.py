"""B-MCP: the cost of one tool call through an MCP server against the same tool called locally.

Prints per-call times (p50, p99 and mean, in ms) of an ``add`` tool: as a local ``@tool``, through
an in-process SDK server, through a stdio server (a child process) and through a streamable
HTTP server on 127.0.0.1. Each call goes the way a robot makes it (``Tool.acall`` on the tool
the robot built), from RobotLab's background loop where ``robot.run`` runs, and, for stdio,
also from a caller on another event loop (``await robot.arun`` in an app's own loop).

    .venv/bin/python benchmarks/mcp.py [--iterations 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # this file is not the SDK "mcp"
sys.path.insert(0, os.path.dirname(HERE))

import robotlab  # noqa: E402
from robotlab.mcp import BackgroundHTTPServer, MCPClient, discover_tools  # noqa: E402
from robotlab.runtime import run_sync  # noqa: E402
from robotlab.tools import Tool  # noqa: E402

SERVER_CODE = textwrap.dedent('''
    from mcp.server.mcpserver import MCPServer

    SERVER = MCPServer("bench")

    @SERVER.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    if __name__ == "__main__":
        SERVER.run("stdio")
''')


@robotlab.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def timed(call: Callable[[], Awaitable[Any]], iterations: int) -> dict[str, float]:
    """Per-call wall times of ``call`` after a warm-up."""
    for _ in range(max(10, iterations // 10)):
        await call()
    walls = []
    for _ in range(iterations):
        start = time.perf_counter()
        await call()
        walls.append(time.perf_counter() - start)
    walls.sort()
    return {
        "p50_ms": walls[len(walls) // 2] * 1e3,
        "p99_ms": walls[max(0, int(len(walls) * 0.99) - 1)] * 1e3,
        "mean_ms": statistics.fmean(walls) * 1e3,
    }


async def mcp_tool(config: Any) -> tuple[MCPClient, Tool]:
    client = await MCPClient(config).aconnect()
    if client.error is not None:
        raise SystemExit(f"could not connect {config!r}: {client.error}")
    [tool] = [t for t in await discover_tools(client) if t.name == "add"]
    return client, tool


async def bench(iterations: int, server_path: Path) -> dict[str, dict[str, float]]:
    """Every measurement, run on RobotLab's background loop."""
    sys.path.insert(0, str(server_path.parent))
    import bench_mcp_server

    args = {"a": 2, "b": 40}
    stdio = {
        "name": "bench",
        "timeout": 60,
        "transport": {"type": "stdio", "command": sys.executable, "args": [str(server_path)]},
    }
    results = {"local tool": await timed(lambda: add.acall(args), iterations)}
    client, tool = await mcp_tool(bench_mcp_server.SERVER)
    results["MCP in process"] = await timed(lambda: tool.acall(args), iterations)
    await client.adisconnect()
    client, tool = await mcp_tool(stdio)
    results["MCP stdio"] = await timed(lambda: tool.acall(args), iterations)
    results["MCP stdio, caller on another loop"] = await asyncio.to_thread(
        lambda: asyncio.run(timed(lambda: tool.acall(args), iterations))
    )
    await client.adisconnect()
    with BackgroundHTTPServer(bench_mcp_server.SERVER) as http:
        client, tool = await mcp_tool(
            {"name": "bench-http", "transport": {"type": "streamable-http", "url": http.url}}
        )
        results["MCP streamable HTTP"] = await timed(lambda: tool.acall(args), iterations)
        await client.adisconnect()
    return results


def main() -> None:
    """Run the benchmark and print a table (and JSON with ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)  # before MCPServer() configures INFO logging
    with tempfile.TemporaryDirectory() as tmp:
        server_path = Path(tmp) / "bench_mcp_server.py"
        server_path.write_text(SERVER_CODE)
        results = run_sync(bench(args.iterations, server_path))
    local = results["local tool"]["p50_ms"]
    print(
        f"MCP tool-call cost, {args.iterations} calls each (Python {platform.python_version()}, "
        f"{platform.machine()})"
    )
    print(f"{'path':38} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9} {'p50 over local':>15}")
    for name, row in results.items():
        extra = "" if name == "local tool" else f"{row['p50_ms'] - local:+.3f} ms"
        print(f"{name:38} {row['p50_ms']:9.3f} {row['p99_ms']:9.3f} {row['mean_ms']:9.3f} {extra:>15}")
    if args.json:
        Path(args.json).write_text(json.dumps({"iterations": args.iterations, "results": results}, indent=2))


if __name__ == "__main__":
    main()
