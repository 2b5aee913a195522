"""Process-level behaviour: ``import robotlab`` leaves the SDK alone; exit stops every MCP server."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_import_robotlab_does_not_import_the_sdk() -> None:
    done = run_python("""
        import sys
        import robotlab
        import robotlab.mcp
        robot = robotlab.build(name="plain", mcp_servers=[{"name": "x", "transport": {"type": "stdio",
                                                                                     "command": "x"}}])
        assert robot.failed_mcp_server_names == []
        print(sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp.")))
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_interpreter_exit_stops_server_processes() -> None:
    done = run_python(f"""
        import sys
        from robotlab.mcp import MCPClient, content_text
        client = MCPClient({{"name": "fixture", "timeout": 60, "transport": {{
            "type": "stdio", "command": sys.executable, "args": [{str(HERE / "mcp_fixture_server.py")!r}]}}}})
        client.connect()
        assert client.error is None, client.error
        print(content_text(client.call_tool("pid")), flush=True)
        # no disconnect: the exit handler must stop the server
    """)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # already gone
    try:
        ready, _, _ = select.select([handle], [], [], 10)  # readable when the process exits
    finally:
        os.close(handle)
    assert ready, f"MCP server {pid} outlived its parent"
