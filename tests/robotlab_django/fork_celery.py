"""The prefork MCP test's Celery app: the parent process uses an MCP server before its pool forks.

``worker_init`` (sent in the worker's main process, before the prefork pool starts) runs the
``clock`` robot once: that starts RobotLab's background loop and a stdio session with
``mcp-server-time`` in the parent, and the robot stays connected while the pool children are
forked. A mark file (``$ROBOTLAB_FORK_TEST_MARK``) records the parent's pid and reply. The same
robot then runs in a pool child through the ordinary ``run_robot`` task.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from celery.signals import worker_init
from django.conf import settings

from tests.robotlab_django.celery_app import app

__all__ = ["MARK_ENV", "TIME_SERVER", "app", "build_clock"]

#: The environment variable naming the file the parent writes after using the MCP server.
MARK_ENV = "ROBOTLAB_FORK_TEST_MARK"
#: The published stdio MCP server (PyPI ``mcp-server-time``).
TIME_SERVER = shutil.which("mcp-server-time") or str(Path(sys.executable).parent / "mcp-server-time")

settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {"clock": "tests.robotlab_django.fork_celery.build_clock"}}

_parent_robot: Any = None  # the parent's robot: kept connected while the pool forks


def _model(request: Any) -> Any:
    """Ask for the time in UTC, then answer with the tool's reply and this process's pid."""
    from robotlab.testing import text, tool_call

    last = request.messages[-1]
    if last["role"] == "tool":
        return text(f"pid {os.getpid()}: {last['content']}")
    return tool_call("get_current_time", timezone="UTC")


def build_clock(**options: Any) -> Any:
    """The ``clock`` robot: ``mcp-server-time`` over stdio and a model that calls it once."""
    import robotlab
    from robotlab.testing import FunctionLLM

    options.pop("llm", None)
    server = {"name": "time", "timeout": 60,
              "transport": {"type": "stdio", "command": TIME_SERVER, "args": ["--local-timezone", "UTC"]}}
    return robotlab.build(name="clock", system_prompt="You tell the time.", llm=FunctionLLM(_model),
                          mcp_servers=[server], **options)


@worker_init.connect
def _use_the_server_in_the_parent(**_: Any) -> None:
    global _parent_robot
    _parent_robot = build_clock()
    result = _parent_robot.run("What time is it?")
    Path(os.environ[MARK_ENV]).write_text(json.dumps({"pid": os.getpid(), "reply": result.reply}))
