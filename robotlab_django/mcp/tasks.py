"""Long runs as MCP tasks (the Tasks extension, ``io.modelcontextprotocol/tasks``): create, poll, result, cancel.

A ``tools/call`` carrying ``task`` (``{"ttl": ...}`` or ``{}``) starts the run and answers at once with
``CreateTaskResult``; the task's id is the run's id. Then, each request checked for its caller's own runs:

- ``tasks/get``: the task, its status the run's (``working``, ``input_required``, ``completed``, ``failed``,
  ``cancelled``);
- ``tasks/result``: waits until the run settles, then the tool call's result (a parked run: its
  ``input_required`` result; answer with a ``tools/call`` carrying the echoed ``requestState``);
- ``tasks/cancel``: cancels the run as the app's cancel does; a finished one is an ``Invalid params`` error;
- ``tasks/list``: the caller's latest runs (50).

Every one is read from the database, so any web process answers it. A run is kept as long as the app keeps
runs (``ttl`` is ``null``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.mcp import auth, tools
from robotlab_django.protocols import runs as protocol_runs
from robotlab_django.runs.control import RunFinishedError

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

    from robotlab_django.models import RobotResult

__all__ = ["EXTENSION", "LISTED", "POLL_INTERVAL_MS", "RESULT_TYPE", "created", "register", "task_of"]

#: The Tasks extension's identifier, advertised under the server's capabilities.
EXTENSION = "io.modelcontextprotocol/tasks"

#: The ``resultType`` of a ``tools/call`` answered with a task.
RESULT_TYPE = "task"

#: Milliseconds a client is told to wait between two ``tasks/get``.
POLL_INTERVAL_MS = 500

#: How many of the caller's runs ``tasks/list`` names.
LISTED = 50

_STATUSES: dict[str, types.TaskStatus] = {
    str(Status.AWAITING): "input_required", str(Status.COMPLETED): "completed", str(Status.FAILED): "failed",
    str(Status.SKIPPED): "failed", str(Status.CANCELLED): "cancelled",
}


def task_of(row: RobotResult) -> types.Task:
    """``row`` as a task: its run id, its status, when it was created and last changed."""
    status = _STATUSES.get(str(row.status), "working")
    message = None
    if status == "input_required":
        message = tools.question_request(row).params.message
    elif status == "failed":
        message = tools.call_result(row).content[0].text  # type: ignore[union-attr]
    return types.Task(task_id=row.run_id, status=status, status_message=message,
                      created_at=row.created_at.isoformat(), last_updated_at=row.updated_at.isoformat(),
                      ttl=None, poll_interval=POLL_INTERVAL_MS)


def _wire(row: RobotResult) -> dict[str, Any]:
    """``row``'s task as JSON, ``ttl`` kept when ``null`` (the SDK drops ``None`` fields of a model it sends)."""
    return task_of(row).model_dump(by_alias=True, mode="json")


def created(row: RobotResult) -> dict[str, Any]:
    """The answer to a ``tools/call`` that asked for a task: the task of the queued run, ``resultType`` ``task``.

    A result shape of the extension's own (the SDK sends it as it is, as it does a claimed ``resultType``).
    """
    return {"resultType": RESULT_TYPE, "task": _wire(row)}


async def _owned(task_id: str) -> tuple[_User, RobotResult]:
    user, scopes = await auth.caller()
    row = await sync_to_async(protocol_runs.find_run)(task_id, user) if task_id else None
    if row is None or row.parent_id is not None or row.robot_name not in auth.allowed_agents(scopes,
                                                                                              [row.robot_name]):
        raise tools.invalid(f"No task {task_id}.")
    return user, row


async def _get(ctx: ServerRequestContext[Any], params: types.GetTaskRequestParams) -> dict[str, Any]:
    _, row = await _owned(params.task_id)
    return _wire(row)  # a GetTaskResult


async def _result(ctx: ServerRequestContext[Any], params: types.GetTaskPayloadRequestParams
                  ) -> types.CallToolResult | types.InputRequiredResult:
    _, row = await _owned(params.task_id)
    return tools.call_result(await protocol_runs.await_settled(row))


async def _cancel(ctx: ServerRequestContext[Any], params: types.CancelTaskRequestParams) -> dict[str, Any]:
    user, row = await _owned(params.task_id)
    try:
        row = await protocol_runs.acancel(row, user)
    except RunFinishedError as exc:
        raise tools.invalid(str(exc)) from None
    return _wire(row)  # a CancelTaskResult


def _latest(user: _User, agents: frozenset[str]) -> list[RobotResult]:
    return list(swappable.result_model().objects.filter(thread__user=user, parent__isnull=True,
                                                        robot_name__in=agents).order_by("-pk")[:LISTED])


async def _list(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams) -> dict[str, Any]:
    user, scopes = await auth.caller()
    rows = await sync_to_async(_latest)(user, auth.allowed_agents(scopes, tools.agent_names()))
    return {"tasks": [_wire(row) for row in rows]}  # a ListTasksResult


def register(server: Server[Any]) -> None:
    """Serve the Tasks extension's methods on ``server`` and advertise the extension."""
    server.add_request_handler("tasks/get", types.GetTaskRequestParams, _get)
    server.add_request_handler("tasks/result", types.GetTaskPayloadRequestParams, _result)
    server.add_request_handler("tasks/cancel", types.CancelTaskRequestParams, _cancel)
    server.add_request_handler("tasks/list", types.PaginatedRequestParams, _list)
    server.extensions = {**(server.extensions or {}), EXTENSION: {}}
