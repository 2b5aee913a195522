"""Registered robots and networks served over MCP (protocol 2026-07-28, streamable HTTP, stateless).

See docs/django/mcp.md: :func:`~robotlab_django.mcp.asgi.mcp_router` mounts the endpoint, each robot and
network is a tool (:mod:`~robotlab_django.mcp.tools`), a long run is a task (:mod:`~robotlab_django.mcp.tasks`),
and requests carry a RobotLab API token or an OAuth token (:mod:`~robotlab_django.mcp.auth`).
"""
from __future__ import annotations

__all__: list[str] = []
