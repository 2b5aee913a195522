"""RobotLab for Python: LLM robots, networks of robots, tools, MCP and memory."""

from __future__ import annotations
