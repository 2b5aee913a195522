"""Registered robots and networks as MCP tools: list them, call one as a stored run, answer its question.

Each robot and network is one tool named after it, taking ``message`` (and ``session``, a session id to go on
with; the caller's own, as on the other doors). A call starts a :class:`~robotlab_django.models.RobotResult` run
through :func:`robotlab_django.protocols.runs.start_for_user` and waits until it settles:

- completed: the reply as text content;
- failed or cancelled: a tool error (``isError``) saying so, the run's public error as its text;
- parked (a question, a tool call to approve): an ``input_required`` result asking the question as a form
  elicitation (one field, ``answer``), its ``requestState`` the run's id. The client's follow-up (the same call
  with ``inputResponses`` and the echoed ``requestState``) answers it and the run goes on.

The ``requestState`` names a run only: every follow-up looks the run up again for the caller, so a state
another user echoes finds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import mcp_types as types
from asgiref.sync import sync_to_async
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from robotlab_django.abstract_models import Status
from robotlab_django.accounting.rate_limits import RateLimitedError
from robotlab_django.protocols import runs as protocol_runs
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.runs.control import BadAnswerError, NotAwaitingError
from robotlab_django.runs.user_errors import public_error

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

    from robotlab_django.models import RobotResult

__all__ = ["ANSWER", "INPUT_SCHEMA", "agent_names", "answer_from", "call_result", "invalid", "list_tools",
           "question_request", "run_of_state", "start_run", "unanswerable"]

#: The key of the one input request a parked run sends, and of the field its form asks for.
ANSWER = "answer"

#: Every tool's input: the message, and optionally the caller's session id to go on with.
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask: the user's message, sent as it is."},
        "session": {"type": "string", "description": "A session id of yours: the run goes on in that "
                    "conversation (created if new)."},
    },
    "required": ["message"],
}


def invalid(message: str) -> MCPError:
    """A JSON-RPC ``Invalid params`` error (-32602) saying ``message``."""
    return MCPError(INVALID_PARAMS, message)


def agent_names() -> list[str]:
    """Every registered robot and network name."""
    return [*registry.names(), *registry.network_names()]


def list_tools(allowed: frozenset[str] | None = None) -> list[types.Tool]:
    """A tool for every registered robot and network (only those in ``allowed`` when given)."""
    tools = []
    for name in agent_names():
        if allowed is not None and name not in allowed:
            continue
        entry: Any = registry.lookup(name)
        kind = "network" if registry.is_network(name) else "robot"
        tools.append(types.Tool(name=name, description=entry.description or f"Ask the RobotLab {kind} {name}.",
                                input_schema=INPUT_SCHEMA))
    return tools


def _arguments(params: types.CallToolRequestParams) -> tuple[str, str | None]:
    arguments = params.arguments or {}
    message, session = arguments.get("message"), arguments.get("session")
    if not isinstance(message, str):
        raise invalid(f"Tool {params.name} takes a 'message' string argument.")
    if session is not None and not isinstance(session, str):
        raise invalid("The 'session' argument is a string (a session id of yours).")
    unknown = sorted(set(arguments) - {"message", "session"})
    if unknown:
        raise invalid(f"Tool {params.name} takes 'message' and 'session', not {', '.join(unknown)}.")
    return message, session


async def start_run(user: _User, params: types.CallToolRequestParams) -> RobotResult:
    """Queue a run of the tool ``params`` names for its message, as ``user``.

    Raises:
        MCPError: bad arguments, an unknown tool, a refused message (invalid params), too many runs.
    """
    message, session = _arguments(params)
    try:
        return await sync_to_async(protocol_runs.start_for_user)(user, params.name, message, session)
    except UnknownRobotError:
        raise invalid(f"No tool {params.name}: call one that tools/list names.") from None
    except protocol_runs.SessionTakenError:
        raise invalid(f"No session {session}.") from None
    except RateLimitedError as exc:
        raise MCPError(-32029, str(exc), {"retry_after": str(exc.retry_after)}) from None
    except ValueError as exc:
        raise invalid(str(exc)) from None


async def run_of_state(user: _User, state: str, tool: str) -> RobotResult:
    """The caller's run of ``tool`` a ``requestState`` names.

    Raises:
        MCPError: no such run of the caller's (another user's run is not found either).
    """
    row = await sync_to_async(protocol_runs.find_run)(state, user) if state else None
    if row is None or row.robot_name != tool or row.parent_id is not None:
        raise invalid("The requestState names no run of yours for this tool: call the tool again without it.")
    return row


def answer_from(responses: types.InputResponses | None) -> str:
    """The text of the client's answer to :data:`ANSWER`.

    Raises:
        MCPError: no answer, a declined or cancelled form, or an answer that is not a string.
    """
    response = (responses or {}).get(ANSWER)
    if not isinstance(response, types.ElicitResult):
        raise invalid(f"Answer the question: send inputResponses with an '{ANSWER}' form result.")
    if response.action != "accept":
        raise invalid(f"The form was {response.action} (not accept): the run still waits for an answer.")
    value = (response.content or {}).get(ANSWER)
    if not isinstance(value, str | int | float | bool):
        raise invalid(f"The form's '{ANSWER}' field is the answer, a string.")
    return str(value)


async def answer(row: RobotResult, text: str, user: _User) -> RobotResult:
    """Answer ``row``'s question as ``user``; the row as it goes on.

    Raises:
        MCPError: the run is not waiting for an answer, or a tool call to approve got neither approve nor deny.
    """
    try:
        return await protocol_runs.aanswer(row, text, user)
    except BadAnswerError as exc:
        raise invalid(str(exc)) from None
    except NotAwaitingError:
        raise invalid(f"The run is {row.status}, not waiting for an answer: call the tool again without "
                      "requestState to go on.") from None


def _question_text(question: dict[str, Any]) -> str:
    text = str(question.get("question") or "")
    if question.get("type") == "approval":
        text = text or f"Approve the call of {question.get('tool') or 'a tool'}?"
        return f"{text}\nAnswer approve or deny."
    choices = [str(choice) for choice in question.get("choices") or []]
    if choices:
        text += "\n" + "\n".join(f"{number}. {choice}" for number, choice in enumerate(choices, 1))
    return text


def question_request(row: RobotResult) -> types.ElicitRequest:
    """The form elicitation asking ``row``'s pending question (one string field, :data:`ANSWER`)."""
    question = dict(row.question or {})
    field: dict[str, Any] = {"type": "string", "title": "Your answer"}
    if question.get("type") == "approval":
        field["enum"] = ["approve", "deny"]
    elif question.get("choices"):
        field["enum"] = [str(choice) for choice in question["choices"]]
    return types.ElicitRequest(params=types.ElicitRequestFormParams(
        message=_question_text(question),
        requested_schema={"type": "object", "properties": {ANSWER: field}, "required": [ANSWER]}))


def call_result(row: RobotResult) -> types.CallToolResult | types.InputRequiredResult:
    """The answer to a tool call whose run settled as ``row``."""
    if row.status == Status.AWAITING:
        return types.InputRequiredResult(input_requests={ANSWER: question_request(row)}, request_state=row.run_id)
    if row.status == Status.COMPLETED:
        return types.CallToolResult(content=[types.TextContent(text=row.reply or "")])
    if row.status == Status.CANCELLED:
        return types.CallToolResult(content=[types.TextContent(text="The run was cancelled.")], is_error=True)
    _, error = public_error(row.error_type, row.error, row.error_kind)
    return types.CallToolResult(content=[types.TextContent(text=error or f"The run {row.status}.")], is_error=True)


def unanswerable(row: RobotResult, protocol_version: str) -> types.CallToolResult:
    """The answer to a client of an older revision (no ``input_required``) whose run asks a question.

    A tool error with the question: the run waits, parked, for an answer from a 2026-07-28 client (the same call
    with ``requestState`` = the run's id) or another door (the chat page, A2A).
    """
    text = (f"The run {row.run_id} waits for an answer to: {question_request(row).params.message}\n"
            f"Protocol {protocol_version} cannot answer it here: answer with an MCP 2026-07-28 client (requestState "
            f"{row.run_id}) or on the chat page.")
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
