"""What an end user reads when a run fails: a short message for a model provider's error; staff see it all.

A failed run keeps the whole error on its row (``error`` and ``error_type``, shown in the admin), and the kind
of a model provider's failure (``error_kind``: :attr:`robotlab.errors.InferenceError.kind`). The chat page,
its JSON, the thread websocket and the protocols show :func:`public_error` instead: for a provider's
failure, a short sentence saying what happened and what to do (:data:`KIND_MESSAGES`, chosen by the kind),
and never the provider's text (which can name the model, the endpoint, the account or the request). Other
errors (the app's own messages, a budget spent, a tool that failed) are shown as they are.

The kind comes from the error's fields, never from its text: the stored ``error_kind`` (or a failure event's),
else the class of a provider exception stored as it was raised (``RateLimitError``: the core's
:data:`robotlab.llm.guard.ERROR_KINDS`). Only a row stored before kinds were stored is read from its text
(:func:`_stored_kind`). :data:`PUBLIC_EVENTS` says which event kinds carry an error to filter.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, assert_never

from robotlab.errors import PROVIDER_ERROR_KINDS, ProviderErrorKind
from robotlab.llm.guard import ERROR_KINDS
from robotlab.streaming import EventKind, Handled, Handling, handling_table

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["GENERIC_PROVIDER_MESSAGE", "KIND_MESSAGES", "PROVIDER_MESSAGES", "PUBLIC_EVENTS", "public_error",
           "public_events", "public_run_id"]

_RATE = "The model is rate limited; try again in a minute."
_DOWN = "The model provider is having trouble; try again in a few minutes."
_STAFF = "The model is not set up correctly on this site; please tell the site's staff."
_QUOTA = "The site's model quota is used up; please tell the site's staff."

#: A provider error of no known kind.
GENERIC_PROVIDER_MESSAGE = "The model could not answer; try again later."

#: The short message of each kind of model provider failure (:data:`robotlab.errors.ProviderErrorKind`).
KIND_MESSAGES: dict[ProviderErrorKind, str] = {
    "auth": _STAFF,
    "permission": _STAFF,
    "not_found": _STAFF,
    "bad_request": _STAFF,
    "configuration": _STAFF,
    "quota": _QUOTA,
    "rate_limit": _RATE,
    "timeout": "The model took too long to answer; try again.",
    "connection": "The model could not be reached; try again in a moment.",
    "server": _DOWN,
    "cut_stream": "The model's answer was interrupted; try again.",
    "context_window": "The conversation is too long for the model; start a new thread.",
    "content_policy": "The model declined this request under its content policy.",
    "unknown": GENERIC_PROVIDER_MESSAGE,
}

#: Short messages by the provider error's class name (litellm's exception classes and the direct client's).
PROVIDER_MESSAGES: dict[str, str] = {name: KIND_MESSAGES[kind] for name, kind in ERROR_KINDS.items()}

#: Rows stored before the kind was: the marks of a provider's error in its text, its class and its status.
_PROVIDER_MARKS = ("litellm.", "LLM request to ")
_CLASS = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Timeout|Provider))\b")
_STATUS = re.compile(r"\(HTTP (\d{3})\)")
_STATUS_KINDS: dict[int, ProviderErrorKind] = {429: "rate_limit", 401: "auth", 403: "permission", 404: "not_found",
                                              408: "timeout", 402: "quota"}


def _stored_kind(error: str) -> ProviderErrorKind | None:
    """The kind of a provider error read from its text, for a row stored before its ``error_kind`` was.

    ``None`` for the app's own text (robotlab's budget or tool-loop ``InferenceError`` too), which is fine to show.
    """
    if not any(mark in error for mark in _PROVIDER_MARKS):
        return None
    for name in _CLASS.findall(error):
        if name in ERROR_KINDS:
            return ERROR_KINDS[name]
    status = _STATUS.search(error)
    if status is not None:
        code = int(status.group(1))
        return _STATUS_KINDS.get(code) or ("server" if code >= 500 else "unknown")
    return "unknown"


def _as_kind(value: str) -> ProviderErrorKind:
    """``value`` as a :data:`~robotlab.errors.ProviderErrorKind` (``unknown`` for a kind this version lacks)."""
    return next((kind for kind in PROVIDER_ERROR_KINDS if kind == value), "unknown")


def public_error(error_type: str | None, error: str | None, kind: str | None = None) -> tuple[str, str]:
    """``(error_type, error)`` as an end user sees them.

    A model provider's error becomes ``("", <short message>)``; anything else is returned as it is.

    Args:
        error_type: The stored error class name (``RobotResult.error_type``).
        error: The stored error text (``RobotResult.error``).
        kind: The stored kind of a provider failure (``RobotResult.error_kind``, a failure event's
            ``error_kind``); empty for any other error, and on rows stored before kinds were.
    """
    name, text = str(error_type or ""), str(error or "")
    if kind:
        return "", KIND_MESSAGES[_as_kind(kind)]
    known = ERROR_KINDS.get(name) or (_stored_kind(text) if text else None)
    return ("", KIND_MESSAGES[known]) if known is not None else (name, text)


def _public(kind: EventKind) -> Handling[Literal["filter", "as is"]]:
    match kind:
        case "run.failed" | "step.failed":
            return Handled("filter", "its error and error_type through public_error")
        case ("run.started" | "run.completed" | "run.interrupted" | "run.cancelled" | "step.started"
              | "step.completed" | "part.created" | "part.completed" | "part.failed" | "tool_call.started"
              | "tool_call.completed" | "text.delta" | "tool_call.arguments.delta" | "tool_call.output.delta"
              | "reasoning.delta" | "data.delta" | "hitl.requested" | "hitl.resolved" | "usage.updated"
              | "metadata.updated" | "stream.ended"):
            return Handled("as is", "carries no error of the run: shown as it is")
        case _:
            assert_never(kind)


#: What :func:`public_events` does with each kind (a kind no table names is shown as it is).
PUBLIC_EVENTS: dict[str, Handling[Literal["filter", "as is"]]] = handling_table("public-error filter", _public)
_FILTERED = frozenset(kind for kind, handling in PUBLIC_EVENTS.items()
                      if isinstance(handling, Handled) and handling.action == "filter")


def public_events(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stream events as an end user gets them.

    A ``run.failed`` or ``step.failed`` event's error through :func:`public_error`, with its ``error_kind``
    (a copy, the kind kept; the others as they are).
    """
    shown: list[dict[str, Any]] = []
    for event in events:
        if event.get("kind") in _FILTERED and ("error" in event or "error_type" in event):
            kind, text = public_error(event.get("error_type"), event.get("error"), event.get("error_kind"))
            event = {**event, "error_type": kind, "error": text}
        shown.append(event)
    return shown


def public_run_id(row: RobotResult) -> str:
    """A run's id in a message a user may read: its run id as a UUID (as the protocols name it), never its key."""
    try:
        return str(uuid.UUID(str(row.run_id)))
    except ValueError:
        return str(row.run_id)
