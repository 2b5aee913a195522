"""django-oauth-toolkit's scopes for the MCP endpoint: ``mcp``, ``robots`` and ``robot:<name>`` for each robot.

Set ``OAUTH2_PROVIDER = {"SCOPES_BACKEND_CLASS": "robotlab_django.mcp.oauth.RobotScopes"}``: the toolkit's
authorization server then offers (and grants) exactly the scopes :mod:`robotlab_django.mcp.auth` reads, one per
registered robot and network, and asks for ``mcp`` when a client names none. Needs django-oauth-toolkit
(the ``protocols`` extra).
"""

from __future__ import annotations

from typing import Any

from oauth2_provider.scopes import BaseScopes

from robotlab_django.mcp.auth import ALL_ROBOTS, ENDPOINT_SCOPE, robot_scope
from robotlab_django.mcp.tools import agent_names

__all__ = ["RobotScopes"]


class RobotScopes(BaseScopes):  # type: ignore[misc]  # django-oauth-toolkit ships no types
    """The scopes of the MCP endpoint, read from the robot registry each time."""

    def get_all_scopes(self) -> dict[str, str]:
        """Every scope and what it lets a client do."""
        scopes = {ENDPOINT_SCOPE: "Use the MCP endpoint", ALL_ROBOTS: "Ask every robot and network"}
        scopes.update({robot_scope(name): f"Ask {name}" for name in agent_names()})
        return scopes

    def get_available_scopes(self, application: Any = None, request: Any = None, *args: Any,
                             **kwargs: Any) -> list[str]:
        """Every scope (any application may ask for any of them; the user decides)."""
        return list(self.get_all_scopes())

    def get_default_scopes(self, application: Any = None, request: Any = None, *args: Any,
                           **kwargs: Any) -> list[str]:
        """``mcp`` alone: a token that reaches no robot until the client asks for one."""
        return [ENDPOINT_SCOPE]
