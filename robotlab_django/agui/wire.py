"""The AG-UI wire shapes of the app's rows: events, interrupts, the thread's messages, errors, SSE frames.

Every event is a JSON object with ``type`` and camelCase fields, an optional field left out rather than ``null`` (the
official clients refuse ``subagentRunId: null``). A parked run's question is an ``Interrupt``: its ``id`` is the
question's ``request_id``, which a resume entry answers; a tool call waiting for approval has the reason
``tool_approval`` and takes ``{"approved": true | false}``, any other question ``input_required`` and a string.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from django.http import JsonResponse

from robotlab_django.runs.approvals import is_approval

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["PROTOCOL_VERSION", "REASON_APPROVAL", "REASON_QUESTION", "compact", "error_response", "event",
           "history_messages", "interrupt", "response_schema", "run_uuid", "sse_frame", "usage"]

#: The AG-UI protocol version this server speaks (``RUN_STARTED.protocolVersion``).
PROTOCOL_VERSION = "1.0"

#: The interrupt reason of a question the robot asks (``AskUser``).
REASON_QUESTION = "input_required"
#: The interrupt reason of a tool call waiting for approval.
REASON_APPROVAL = "tool_approval"


def compact(**fields: object) -> dict[str, Any]:
    """An AG-UI object of ``fields`` (camelCase names), those that are ``None`` left out."""
    return {name: value for name, value in fields.items() if value is not None}


def event(kind: str, **fields: object) -> dict[str, Any]:
    """The AG-UI event ``kind`` with ``fields`` (camelCase names), those that are ``None`` left out."""
    return {"type": kind, **compact(**fields)}


def sse_frame(data: Mapping[str, Any], event_id: str | None = None) -> str:
    """One Server-Sent Event: ``id: <event_id>`` (when given) and ``data: <json>``."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}data: {json.dumps(data, ensure_ascii=False, separators=(',', ':'), default=str)}\n\n"


def error_response(code: str, message: str, status: int) -> JsonResponse:
    """An error before any event was sent: ``{"code", "message"}`` with HTTP ``status``."""
    return JsonResponse({"code": code, "message": message}, status=status)


def run_uuid(row: RobotResult) -> str:
    """``row``'s run id as a UUID (as the protocol doors name runs)."""
    try:
        return str(uuid.UUID(str(row.run_id)))
    except ValueError:
        return str(row.run_id)


def response_schema(question: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of the answer a parked ``question`` takes (the interrupt's ``responseSchema``)."""
    if is_approval(question):
        return {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
    schema: dict[str, Any] = {"type": "string"}
    choices = [str(choice) for choice in question.get("choices") or []]
    if choices:
        schema["enum"] = choices
    if question.get("default") is not None:
        schema["default"] = str(question["default"])
    return schema


def interrupt(question: Mapping[str, Any], *, tool_call_id: str | None = None, subagent: str | None = None,
              run_id: str = "") -> dict[str, Any]:
    """The ``Interrupt`` of a parked run's ``question`` (a row's ``question``: an ``AskRequest``'s dict).

    ``metadata.robotlab`` holds what the question says besides its text: its ``choices`` and ``default``, a tool call's
    ``tool``, ``arguments`` and ``details`` (a model tool's before/after ``changes``), and the stored ``runId``.
    """
    approval = is_approval(question)
    extra: dict[str, Any] = {"runId": run_id} if run_id else {}
    for key in ("choices", "default") + (("tool", "arguments", "details") if approval else ()):
        if question.get(key) not in (None, [], {}):
            extra[key] = question[key]
    return compact(id=str(question.get("request_id") or ""),
                 reason=REASON_APPROVAL if approval else REASON_QUESTION,
                 message=str(question.get("question") or ""), toolCallId=tool_call_id,
                 responseSchema=response_schema(question), subagentRunId=subagent,
                 metadata={"robotlab": extra})


def usage(row: RobotResult) -> list[dict[str, Any]] | None:
    """The ``usage`` of a run's end: its token totals (``None`` when it used none)."""
    used_in, used_out = int(row.input_tokens or 0), int(row.output_tokens or 0)
    if not used_in and not used_out:
        return None
    return [compact(model=row.model or None, inputTokens=used_in, outputTokens=used_out,
                  totalTokens=used_in + used_out)]


def _text(content: object) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _arguments(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value or {}, ensure_ascii=False, default=str)


def _stored(row: RobotResult, prefix: str) -> Iterable[dict[str, Any]]:
    """The messages of one completed run's transcript (``row.messages``, OpenAI's format) as AG-UI messages."""
    for index, message in enumerate(row.messages or []):
        role, key = message.get("role"), f"{prefix}-{index}"
        if role == "user":
            yield {"id": key, "role": "user", "content": _text(message.get("content"))}
        elif role == "assistant":
            calls = [{"id": str(call.get("id") or f"{key}-{number}"), "type": "function",
                      "function": {"name": str((call.get("function") or {}).get("name") or call.get("name") or ""),
                                   "arguments": _arguments((call.get("function") or {}).get("arguments"))}}
                     for number, call in enumerate(message.get("tool_calls") or [])]
            text = _text(message.get("content"))
            yield compact(id=key, role="assistant", content=text or None, toolCalls=calls or None)
        elif role == "tool":
            yield {"id": key, "role": "tool", "toolCallId": str(message.get("tool_call_id") or ""),
                   "content": _text(message.get("content"))}


def history_messages(rows: Iterable[RobotResult]) -> list[dict[str, Any]]:
    """The AG-UI messages of a thread's earlier runs (``rows`` in order), ids made from their run ids.

    A completed run with a transcript gives its user, assistant and tool messages (never its instructions);
    any other run its input and whatever reply it kept.
    """
    messages: list[dict[str, Any]] = []
    for row in rows:
        prefix = run_uuid(row)
        stored = list(_stored(row, prefix)) if row.messages else []
        if any(message["role"] in ("user", "assistant") for message in stored):
            messages.extend(stored)
            continue
        if row.input:
            messages.append({"id": f"{prefix}-input", "role": "user", "content": str(row.input)})
        if row.reply:
            messages.append({"id": f"{prefix}-reply", "role": "assistant", "content": str(row.reply)})
    return messages
