"""The MCP server of the registered robots and networks: the SDK's low-level ``Server`` with the app's handlers.

``tools/list`` names the robots and networks the caller's token reaches; ``tools/call`` runs one as a stored run
(:mod:`robotlab_django.mcp.tools`); with the Tasks extension (``io.modelcontextprotocol/tasks``) a call that asks
for a task returns at once and the run is followed with ``tasks/get``, ``tasks/result`` and ``tasks/cancel``
(:mod:`robotlab_django.mcp.tasks`). A client of an older revision (the 2025 handshake, served statelessly too)
gets the same tools; a call ignores ``task`` and a question is a tool error saying where to answer it. Each
handler asks :func:`~robotlab_django.mcp.auth.caller` who asks, every request: nothing is kept between requests,
so any web process answers any of them.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

import robotlab
from robotlab_django.abstract_models import Status
from robotlab_django.mcp import auth, tasks, tools
from robotlab_django.protocols import runs as protocol_runs

__all__ = ["SERVER_NAME", "build_server"]

#: The server's name in ``server/discover`` and ``initialize``.
SERVER_NAME = "robotlab"


async def _list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
                      ) -> types.ListToolsResult:
    _, scopes = await auth.caller()
    return types.ListToolsResult(tools=tools.list_tools(auth.allowed_agents(scopes, tools.agent_names())))


async def _call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                     ) -> types.CallToolResult | types.InputRequiredResult:
    user, scopes = await auth.caller()
    modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS  # input_required and tasks are 2026-07-28's
    if params.name not in auth.allowed_agents(scopes, [params.name]):
        raise tools.invalid(f"No tool {params.name} for this token: its scopes reach "
                            f"{auth.robot_scope(params.name)!r} or {auth.ALL_ROBOTS!r}.")
    if params.request_state is not None or params.input_responses:
        row = await tools.run_of_state(user, params.request_state or "", params.name)
        row = await tools.answer(row, tools.answer_from(params.input_responses), user)
    else:
        row = await tools.start_run(user, params)
        if params.task is not None and modern:
            return tasks.created(row)  # type: ignore[return-value]  # the Tasks extension's own result shape
    row = await protocol_runs.await_settled(row)
    if row.status == Status.AWAITING and not modern:
        return tools.unanswerable(row, ctx.protocol_version)
    return tools.call_result(row)


def build_server() -> Server[Any]:
    """A fresh low-level ``Server`` with the app's tool and task handlers."""
    server: Server[Any] = Server(SERVER_NAME, version=robotlab.__version__,
                                 instructions="RobotLab robots and networks: call one with your message.",
                                 on_list_tools=_list_tools, on_call_tool=_call_tool)
    tasks.register(server)
    return server
