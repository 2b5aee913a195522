"""AG-UI's ``RunAgentInput`` as the server reads it, and a resume entry's payload as an answer.

The thread keeps the conversation (a run reads its stored history, not the client's copy), so of ``messages`` the
server takes the last one, the user's new message: its text, and its media parts (images, audio, documents, as
``data`` or ``url`` sources) as the run's attachments. ``tools`` and ``context`` are checked and otherwise unused (a
robot calls its own tools), ``state`` and ``forwardedProps`` pass through untouched. ``resume`` answers the interrupt
a parked run ended with. Anything malformed is an :class:`InputError` whose message names the field.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from robotlab.attachments import Attachment
from robotlab.errors import AttachmentError
from robotlab_django.protocols.runs import check_session_id
from robotlab_django.runs.approvals import decision_of, is_approval

__all__ = ["MAX_RUN_ID_LENGTH", "ROLES", "InputError", "ResumeEntry", "RunInput", "answer_text", "parse_input"]

#: The roles a message of ``messages`` may have.
ROLES = ("developer", "system", "assistant", "user", "tool", "activity", "reasoning")
#: The longest ``runId`` taken.
MAX_RUN_ID_LENGTH = 200
_MEDIA = ("image", "audio", "video", "document")


class InputError(ValueError):
    """The request body is not a ``RunAgentInput`` this server takes (the message names what is wrong)."""


@dataclass(frozen=True)
class ResumeEntry:
    """One answer of ``resume``: the interrupt it answers, ``resolved`` or ``cancelled``, and the answer."""

    interrupt_id: str
    status: str
    payload: Any = None


@dataclass(frozen=True)
class RunInput:
    """What a ``RunAgentInput`` asks: the thread, the run, the new message (its text and files), or a resume."""

    thread_id: str
    run_id: str
    message: dict[str, Any] | None
    text: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    resume: list[ResumeEntry] = field(default_factory=list)
    state: Any = None


def _shown(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _string(body: Mapping[str, Any], key: str, where: str = "", *, required: bool = True) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}{key!r} must be a non-empty string, not {_shown(value)}.")
    return value


def _list(body: Mapping[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"{key!r} must be a list, not {_shown(value)}.")
    return value


def _objects(body: Mapping[str, Any], key: str, fields: tuple[str, ...]) -> None:
    for index, item in enumerate(_list(body, key)):
        if not isinstance(item, dict):
            raise InputError(f"{key}[{index}] must be an object, not {_shown(item)}.")
        for name in fields:
            if not isinstance(item.get(name), str):
                raise InputError(f"{key}[{index}].{name} must be a string, not {_shown(item.get(name))}.")


def _source(part: Mapping[str, Any], where: str) -> Attachment:
    """The attachment of a media part (``source``: ``data`` or ``url``; the legacy ``binary`` part too)."""
    source = part.get("source") if part.get("type") != "binary" else {
        "type": "url" if part.get("url") else "data", "value": part.get("url") or part.get("data"),
        "mimeType": part.get("mimeType")}
    if not isinstance(source, dict):
        raise InputError(f"{where}.source must be an object with type 'data' or 'url'.")
    kind, value, mime = source.get("type"), source.get("value"), source.get("mimeType")
    name = part.get("filename") if isinstance(part.get("filename"), str) else None
    if not isinstance(value, str) or not value:
        raise InputError(f"{where}.source.value must be a non-empty string.")
    if kind == "data":
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(f"{where}.source.value is not valid base64.") from None
        return Attachment(data=data, mime_type=mime if isinstance(mime, str) else None, name=name)
    if kind == "url" and value.startswith("data:"):
        return Attachment.from_data_url(value, name=name)
    if kind == "url" and value.startswith(("http://", "https://")):
        return Attachment(url=value, mime_type=mime if isinstance(mime, str) else None, name=name)
    if kind == "url":
        raise InputError(f"{where}.source.value must be an http(s) or data: URL.")
    raise InputError(f"{where}.source.type must be 'data' or 'url' (a provider's file id is not taken), "
                     f"not {_shown(kind)}.")


def _content(content: object, where: str) -> tuple[str, list[Attachment]]:
    """The text and the files of a user message's ``content`` (a string, or a list of parts)."""
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise InputError(f"{where}.content must be a string or a list of parts, not {_shown(content)}.")
    texts: list[str] = []
    files: list[Attachment] = []
    for index, part in enumerate(content):
        at = f"{where}.content[{index}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind in (*_MEDIA, "binary") and isinstance(part, dict):
            try:
                files.append(_source(part, at))
            except AttachmentError as exc:
                raise InputError(f"{at}: {exc}.") from None
        else:
            raise InputError(f"{at} must be a text part {{'type': 'text', 'text': ...}} or a media part (image, "
                             f"audio, video, document), not {_shown(part)}.")
    return "\n".join(texts), files


def _messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    if not isinstance(body.get("messages"), list):
        raise InputError(f"'messages' is required: the conversation, a list of messages, not "
                         f"{_shown(body.get('messages'))}.")
    messages: list[dict[str, Any]] = body["messages"]
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InputError(f"messages[{index}] must be an object, not {_shown(message)}.")
        _string(message, "id", f"messages[{index}].")
        if message.get("role") not in ROLES:
            raise InputError(f"messages[{index}].role must be one of {', '.join(ROLES)}, not "
                             f"{_shown(message.get('role'))}.")
    return messages


def _resume(body: Mapping[str, Any]) -> list[ResumeEntry]:
    entries = []
    for index, item in enumerate(_list(body, "resume")):
        if not isinstance(item, dict):
            raise InputError(f"resume[{index}] must be an object, not {_shown(item)}.")
        interrupt = _string(item, "interruptId", f"resume[{index}].")
        if item.get("status") not in ("resolved", "cancelled"):
            raise InputError(f"resume[{index}].status must be 'resolved' or 'cancelled', not "
                             f"{_shown(item.get('status'))}.")
        entries.append(ResumeEntry(str(interrupt), str(item["status"]), item.get("payload")))
    return entries


def parse_input(body: object) -> RunInput:
    """The ``RunAgentInput`` ``body`` (parsed JSON) as a :class:`RunInput`.

    Raises:
        InputError: it is not one, or it starts no run: without ``resume``, ``messages`` must end with the user's
            new message (the message names the field and what was wrong).
    """
    if not isinstance(body, dict):
        raise InputError(f"The request body must be a RunAgentInput JSON object, not {_shown(body)}.")
    thread_id = str(_string(body, "threadId"))
    try:
        check_session_id(thread_id)
    except ValueError as exc:
        raise InputError(f"'threadId': {str(exc).replace('A session (context) id', 'a thread id')}") from None
    run_id = str(_string(body, "runId"))
    if len(run_id) > MAX_RUN_ID_LENGTH:
        raise InputError(f"'runId' has at most {MAX_RUN_ID_LENGTH} characters, got {len(run_id)}.")
    for key in ("protocolVersion", "parentRunId"):
        _string(body, key, required=False)
    _objects(body, "tools", ("name", "description"))
    _objects(body, "context", ("description", "value"))
    messages, resume = _messages(body), _resume(body)
    last = messages[-1] if messages else None
    if resume:
        return RunInput(thread_id, run_id, None, resume=resume, state=body.get("state"))
    if last is None or last.get("role") != "user":
        got = f"its last message has the role {last.get('role')!r}" if last else "it is empty"
        raise InputError(f"'messages' must end with the user's new message (role 'user'): {got}. To answer an "
                         "interrupt, send 'resume'.")
    text, files = _content(last.get("content"), f"messages[{len(messages) - 1}]")
    if not text.strip() and not files:
        raise InputError(f"messages[{len(messages) - 1}] is empty: send some text or a file.")
    return RunInput(thread_id, run_id, last, text, files, state=body.get("state"))


def answer_text(entry: ResumeEntry, question: Mapping[str, Any]) -> str:
    """The answer a ``resolved`` resume entry gives the parked ``question``, as the run's answer text.

    A question takes a string payload (or ``{"answer": "..."}``); a tool call to approve takes
    ``{"approved": true | false}`` (or ``"approve"`` / ``"deny"``).

    Raises:
        InputError: the payload is not such an answer.
    """
    payload = entry.payload
    if is_approval(question):
        approved = payload.get("approved") if isinstance(payload, dict) else None
        if isinstance(payload, str) and decision_of(payload) is not None:
            approved = decision_of(payload)
        if not isinstance(approved, bool):
            raise InputError(f"Interrupt {entry.interrupt_id} waits for the approval of a tool call: its payload is "
                             f'{{"approved": true}} or {{"approved": false}}, not {_shown(payload)}.')
        return "approve" if approved else "deny"
    if isinstance(payload, dict) and isinstance(payload.get("answer"), str):
        return str(payload["answer"])
    if isinstance(payload, str):
        return payload
    raise InputError(f"Interrupt {entry.interrupt_id} asks a question: its payload is the answer, a string (or "
                     f'{{"answer": "..."}}), not {_shown(payload)}.')
