"""The ACP wire shapes of the app's rows.

A run row as an ACP ``Run``, a robot as an ``AgentManifest``, the protocol's error object, and the text of ACP input
messages.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import JsonResponse

from ..abstract_models import Status
from ..registry import registry
from ..user_errors import public_error

__all__ = ["STATUSES", "agent_manifest", "error_response", "input_text", "parse_run_id", "run_object",
           "text_message"]

#: The ACP run status of each row status.
STATUSES: dict[str, str] = {
    str(Status.QUEUED): "created", str(Status.RUNNING): "in-progress", str(Status.RETRYING): "in-progress",
    str(Status.AWAITING): "awaiting", str(Status.COMPLETED): "completed", str(Status.FAILED): "failed",
    str(Status.SKIPPED): "failed", str(Status.CANCELLED): "cancelled",
}

#: HTTP status of each ACP error code.
HTTP_STATUS = {"invalid_input": 422, "not_found": 404, "server_error": 500, "unauthorized": 401}


def error_response(code: str, message: str) -> JsonResponse:
    """The protocol's error object ``{"code", "message"}`` with the code's HTTP status."""
    return JsonResponse({"code": code, "message": message}, status=HTTP_STATUS.get(code, 400))


def agent_manifest(name: str) -> dict[str, Any]:
    """The ``AgentManifest`` of the registered robot or network ``name``."""
    entry = registry.lookup(name)
    kind = "network" if registry.is_network(name) else "robot"
    return {"name": name, "description": entry.description or "",
            "metadata": {"framework": "RobotLab", "tags": [kind]},
            "input_content_types": ["text/plain"], "output_content_types": ["text/plain"]}


def text_message(text: str, role: str = "agent") -> dict[str, Any]:
    """An ACP ``Message`` with one ``text/plain`` part."""
    return {"role": role, "parts": [{"content_type": "text/plain", "content": text, "content_encoding": "plain"}]}


def input_text(messages: Any) -> str:
    """The text of ACP input ``messages`` (their ``text/*`` parts joined); raises ``ValueError`` if malformed."""
    if not isinstance(messages, list) or not messages:
        raise ValueError('"input" must be a non-empty list of messages, each {"parts": [...]}.')
    texts: list[str] = []
    for message in messages:
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            raise ValueError('Each input message needs "parts", a list of {"content_type", "content"}.')
        for part in parts:
            content_type = str(part.get("content_type") or "text/plain") if isinstance(part, dict) else ""
            if not content_type.startswith("text/"):
                raise ValueError(f"Unsupported part content type {content_type!r}; send text/plain parts.")
            texts.append(str(part.get("content") or ""))
    return "\n".join(texts)


def parse_run_id(value: str) -> str | None:
    """The stored run id (32 hex characters) of an ACP run id (a UUID), or ``None`` if not a UUID."""
    try:
        return uuid.UUID(value).hex
    except ValueError:
        return None


def run_object(row: Any, session_id: str) -> dict[str, Any]:
    """The ACP ``Run`` of ``row``: status, output (the reply), await request (the pending question), error."""
    status = STATUSES.get(row.status, "in-progress")
    run: dict[str, Any] = {
        "run_id": str(uuid.UUID(row.run_id)), "agent_name": row.robot_name, "session_id": session_id,
        "status": status, "output": [text_message(row.reply)] if row.reply else [], "await_request": None,
        "error": None, "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if getattr(row, "finished_at", None) else None,
    }
    if status == "awaiting" and row.question:
        run["await_request"] = {"type": "message", "message": text_message(str(row.question.get("question", "")))}
    if status == "failed":
        _, message = public_error(row.error_type, row.error)
        run["error"] = {"code": "server_error", "message": message or "The run failed."}
    return run
