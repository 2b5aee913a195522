"""What an end user reads when a run fails: a short message for a model provider's error; staff see it all.

A failed run keeps the whole error on its row (``error`` and ``error_type``, shown in the admin).
The chat page, its JSON and the thread websocket show :func:`public_error` instead: when the
failure came from the model provider (a litellm exception such as ``RateLimitError``, or the
:class:`robotlab.errors.InferenceError` that wraps one), a short sentence saying what happened
and what to do, and never the provider's text (which can name the model, the endpoint, the
account or the request). Other errors (the app's own messages, a budget spent, a tool that
failed) are shown as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from robotlab.streaming import RUN_FAILED, STEP_FAILED

__all__ = ["GENERIC_PROVIDER_MESSAGE", "PROVIDER_MESSAGES", "public_error", "public_events"]

_RATE = "The model is rate limited; try again in a minute."
_DOWN = "The model provider is having trouble; try again in a few minutes."
_STAFF = "The model is not set up correctly on this site; please tell the site's staff."
_QUOTA = "The site's model quota is used up; please tell the site's staff."

#: Short messages by the provider error's class name (litellm's exception classes and their bases).
PROVIDER_MESSAGES: dict[str, str] = {
    "RateLimitError": _RATE,
    "CallerCredentialRateLimitError": _RATE,
    "Timeout": "The model took too long to answer; try again.",
    "APITimeoutError": "The model took too long to answer; try again.",
    "APIConnectionError": "The model could not be reached; try again in a moment.",
    "ServiceUnavailableError": _DOWN,
    "InternalServerError": _DOWN,
    "BadGatewayError": _DOWN,
    "APIError": _DOWN,
    "MidStreamFallbackError": "The model's answer was interrupted; try again.",
    "ContextWindowExceededError": "The conversation is too long for the model; start a new thread.",
    "ContentPolicyViolationError": "The model declined this request under its content policy.",
    "AuthenticationError": _STAFF,
    "CallerCredentialAuthenticationError": _STAFF,
    "PermissionDeniedError": _STAFF,
    "NotFoundError": _STAFF,
    "BadRequestError": _STAFF,
    "InvalidRequestError": _STAFF,
    "UnprocessableEntityError": _STAFF,
    "UnsupportedParamsError": _STAFF,
    "LiteLLMUnknownProvider": _STAFF,
    "PaymentRequiredError": _QUOTA,
    "BudgetExceededError": _QUOTA,
}
#: A provider error of no class listed in :data:`PROVIDER_MESSAGES`.
GENERIC_PROVIDER_MESSAGE = "The model could not answer; try again later."

#: By HTTP status, for a provider error whose class is unknown (robotlab's InferenceError names it).
_BY_STATUS = {429: _RATE, 401: _STAFF, 403: _STAFF, 404: _STAFF, 408: PROVIDER_MESSAGES["Timeout"],
              402: _QUOTA}
_STATUS = re.compile(r"\(HTTP (\d{3})\)")
_CLASS = re.compile(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Timeout|Provider))\b")
_PROVIDER_MARKS = ("litellm.", "LLM request to ")


def _provider_message(error_type: str, error: str) -> str | None:
    """The short message when the error came from the model provider, else ``None``."""
    if error_type in PROVIDER_MESSAGES:
        return PROVIDER_MESSAGES[error_type]
    if not any(mark in error for mark in _PROVIDER_MARKS):
        return None  # the app's own text (robotlab's budget or tool-loop InferenceError too) is fine to show
    for name in _CLASS.findall(error):
        if name in PROVIDER_MESSAGES:
            return PROVIDER_MESSAGES[name]
    status = _STATUS.search(error)
    if status is not None:
        code = int(status.group(1))
        return _BY_STATUS.get(code) or (_DOWN if code >= 500 else GENERIC_PROVIDER_MESSAGE)
    return GENERIC_PROVIDER_MESSAGE


def public_error(error_type: str | None, error: str | None) -> tuple[str, str]:
    """``(error_type, error)`` as an end user sees them.

    A model provider's error becomes ``("", <short message>)``; anything else is returned as it is.

    Args:
        error_type: The stored error class name (``RobotResult.error_type``).
        error: The stored error text (``RobotResult.error``).
    """
    kind, text = str(error_type or ""), str(error or "")
    message = _provider_message(kind, text) if (kind or text) else None
    return ("", message) if message is not None else (kind, text)


def public_events(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stream events as an end user gets them.

    A ``run.failed`` or ``step.failed`` event's error through :func:`public_error` (a copy; the others as they are).
    """
    shown: list[dict[str, Any]] = []
    for event in events:
        if event.get("kind") in (RUN_FAILED, STEP_FAILED) and ("error" in event or "error_type" in event):
            kind, text = public_error(event.get("error_type"), event.get("error"))
            event = {**event, "error_type": kind, "error": text}
        shown.append(event)
    return shown
