"""The ACP wire shapes of the app's rows.

A run row as an ACP ``Run``, a robot as an ``AgentManifest``, the protocol's error object, and the text and files
(the run's attachments) of ACP input messages.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from typing import TYPE_CHECKING, Any

from django.http import JsonResponse

from robotlab.attachments import Attachment
from robotlab.errors import AttachmentError
from robotlab_django.abstract_models import Status
from robotlab_django.registry import registry
from robotlab_django.runs.user_errors import public_error

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["INPUT_CONTENT_TYPES", "STATUSES", "agent_manifest", "await_message", "error_response", "input_content",
           "input_text", "parse_run_id", "parse_session_id", "run_object", "text_message"]

#: The ACP run status of each row status.
STATUSES: dict[str, str] = {
    str(Status.QUEUED): "created", str(Status.RUNNING): "in-progress", str(Status.RETRYING): "in-progress",
    str(Status.AWAITING): "awaiting", str(Status.COMPLETED): "completed", str(Status.FAILED): "failed",
    str(Status.SKIPPED): "failed", str(Status.CANCELLED): "cancelled",
}

#: HTTP status of each ACP error code.
HTTP_STATUS = {"invalid_input": 422, "not_found": 404, "server_error": 500, "unauthorized": 401}


def error_response(code: str, message: str, status: int | None = None) -> JsonResponse:
    """The protocol's error object ``{"code", "message"}`` with ``status``, by default the code's HTTP status."""
    return JsonResponse({"code": code, "message": message}, status=status or HTTP_STATUS.get(code, 400))


def agent_manifest(name: str) -> dict[str, Any]:
    """The ``AgentManifest`` of the registered robot or network ``name``."""
    entry = registry.lookup(name)
    kind = "network" if registry.is_network(name) else "robot"
    return {"name": name, "description": entry.description or "",
            "metadata": {"framework": "RobotLab", "tags": [kind]},
            "input_content_types": INPUT_CONTENT_TYPES, "output_content_types": ["text/plain"]}


#: The content types an agent takes: text, and files that become the run's attachments (images, documents,
#: text files, WAV/MP3 audio; see :mod:`robotlab.attachments`).
INPUT_CONTENT_TYPES = ["text/plain", "image/*", "application/pdf", "application/*", "text/*", "audio/wav",
                       "audio/mpeg"]


def text_message(text: str, role: str = "agent") -> dict[str, Any]:
    """An ACP ``Message`` with one ``text/plain`` part."""
    return {"role": role, "parts": [{"content_type": "text/plain", "content": text, "content_encoding": "plain"}]}


def input_text(messages: object) -> str:
    """The text of ACP input ``messages`` (their ``text/*`` parts joined); raises ``ValueError`` if malformed.

    Any other part is an error here (an answer to a question is text); see :func:`input_content`.
    """
    text, files = input_content(messages)
    if files:
        raise ValueError(f"Unsupported part content type {files[0].mime_type!r} here; send text/plain parts.")
    return text


def input_content(messages: object) -> tuple[str, list[Attachment]]:
    """The text and the attachments of ACP input ``messages``.

    A ``text/*`` part without a ``name`` is text (parts joined by newlines); any other part is a file, which
    becomes a :class:`robotlab.Attachment`: ``content_url`` (an ``http(s)`` image URL, or a ``data:`` URL), or
    ``content`` (base64 when ``content_encoding`` is ``"base64"``), of type ``content_type``.

    Raises:
        ValueError: the messages are malformed, or a part cannot be an attachment (the message names the part).
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError('"input" must be a non-empty list of messages, each {"parts": [...]}.')
    texts: list[str] = []
    files: list[Attachment] = []
    for number, message in enumerate(messages, 1):
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(parts, list):
            raise ValueError('Each input message needs "parts", a list of {"content_type", "content"}.')
        for index, part in enumerate(parts, 1):
            if not isinstance(part, dict):
                raise ValueError(f"Part {index} of message {number} is not an object.")
            content_type = str(part.get("content_type") or "text/plain")
            if content_type.startswith("text/") and not part.get("name") and not part.get("content_url"):
                texts.append(_decoded(part, number, index).decode("utf-8", errors="replace"))
                continue
            try:
                files.append(_attachment(part, content_type, number, index))
            except AttachmentError as exc:
                raise ValueError(f"Part {index} of message {number}: {exc}.") from None
    return "\n".join(texts), files


def _decoded(part: dict[str, Any], number: int, index: int) -> bytes:
    """A part's ``content`` as bytes (base64-decoded when ``content_encoding`` says so)."""
    content = str(part.get("content") or "")
    if part.get("content_encoding") != "base64":
        return content.encode("utf-8")
    try:
        return base64.b64decode(content, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"Part {index} of message {number}: its content is not valid base64.") from None


def _attachment(part: dict[str, Any], content_type: str, number: int, index: int) -> Attachment:
    """The :class:`Attachment` a file part carries."""
    name = str(part["name"]) if part.get("name") else None
    url = part.get("content_url")
    if url:
        url = str(url)
        if url.startswith("data:"):
            return Attachment.from_data_url(url, name=name)
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"Part {index} of message {number}: content_url must be an http(s) or data: URL.")
        return Attachment(url=url, mime_type=None if content_type == "text/plain" else content_type, name=name)
    if part.get("content") is None:
        raise ValueError(f"Part {index} of message {number} ({content_type}) has neither content nor content_url.")
    return Attachment(data=_decoded(part, number, index), mime_type=content_type, name=name)


def await_message(question: dict[str, Any]) -> dict[str, Any]:
    """The message of an ``await_request``: the question's text.

    A tool call waiting for approval (:mod:`robotlab_django.runs.approvals`) adds the call as a JSON part named
    ``approval``: ``request_id``, ``tool``, ``arguments``, ``details`` (a model tool's before/after ``changes``) and
    the ``choices`` (``approve``, ``deny``); the answer is a message with the text ``approve`` or ``deny``.
    """
    message = text_message(str(question.get("question", "")))
    if question.get("type") == "approval":
        call = {key: question.get(key) for key in ("request_id", "tool", "arguments", "details", "choices")}
        message["parts"].append({"name": "approval", "content_type": "application/json", "content_encoding": "plain",
                                 "content": json.dumps(call, ensure_ascii=False, default=str)})
    return message


def parse_run_id(value: str) -> str | None:
    """The stored run id (32 hex characters) of an ACP run id (a UUID), or ``None`` if not a UUID."""
    try:
        return uuid.UUID(value).hex
    except ValueError:
        return None


def parse_session_id(value: object) -> str:
    """An ACP session id (a UUID, as the protocol's ``SessionId`` is) in its canonical form.

    Raises:
        ValueError: it is not a UUID string (the message shows the start of what was sent).
    """
    if isinstance(value, str):
        try:
            return str(uuid.UUID(value))
        except ValueError:
            pass
    shown = json.dumps(value, default=str)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    raise ValueError(f"A session id is a UUID (as the ACP client makes them), not {shown}.")


def run_object(row: RobotResult, session_id: str) -> dict[str, Any]:
    """The ACP ``Run`` of ``row``: status, output (the reply), await request (the pending question), error."""
    status = STATUSES.get(row.status, "in-progress")
    run: dict[str, Any] = {
        "run_id": str(uuid.UUID(row.run_id)), "agent_name": row.robot_name, "session_id": session_id,
        "status": status, "output": [text_message(row.reply)] if row.reply else [], "await_request": None,
        "error": None, "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }
    if status == "awaiting" and row.question:
        run["await_request"] = {"type": "message", "message": await_message(row.question)}
    if status == "failed":
        _, message = public_error(row.error_type, row.error, row.error_kind)
        run["error"] = {"code": "server_error", "message": message or "The run failed."}
    return run
