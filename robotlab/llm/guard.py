"""What every model transport does around a request: the guard against real providers, and failures.

* Before a request, :func:`check_allow_real_requests` raises :class:`RealRequestBlocked` when real
  requests are blocked (the pytest plugin blocks them in every test) and the endpoint is not loopback.
* When a request fails, :func:`error_for` turns the provider's exception into an
  :class:`~robotlab.errors.InferenceError` that names the model, the kind of failure and the HTTP status,
  and carries them as fields (``provider``, ``status_code``, ``retry_after``, ``kind``).

The exception classes of both transports (litellm's, and those of the direct client) are listed once, in
:data:`ERROR_KINDS`, with the :data:`~robotlab.errors.ProviderErrorKind` each one means.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import TypedDict
from urllib.parse import urlparse

from ..errors import ConfigurationError, InferenceError, ProviderErrorKind

__all__ = [
    "ALLOW_REAL_REQUESTS",
    "ERROR_KINDS",
    "ProviderFields",
    "RealRequestBlocked",
    "check_allow_real_requests",
    "error_for",
    "error_kind",
    "provider_fields",
]

#: Set to ``False`` (the pytest plugin does) to make every request to a non-loopback
#: provider raise :class:`RealRequestBlocked`. ``robotlab.llm.ALLOW_REAL_REQUESTS`` reads and sets it.
ALLOW_REAL_REQUESTS = True

ERROR_KINDS: dict[str, ProviderErrorKind] = {
    # litellm's exception classes (and the openai SDK's they derive from)
    "AuthenticationError": "auth",
    "CallerCredentialAuthenticationError": "auth",
    "PermissionDeniedError": "permission",
    "NotFoundError": "not_found",
    "BadRequestError": "bad_request",
    "InvalidRequestError": "bad_request",
    "UnprocessableEntityError": "bad_request",
    "UnsupportedParamsError": "bad_request",
    "ContextWindowExceededError": "context_window",
    "ContentPolicyViolationError": "content_policy",
    "PaymentRequiredError": "quota",
    "BudgetExceededError": "quota",
    "RateLimitError": "rate_limit",
    "CallerCredentialRateLimitError": "rate_limit",
    "Timeout": "timeout",
    "APITimeoutError": "timeout",
    "ServiceUnavailableError": "server",
    "InternalServerError": "server",
    "BadGatewayError": "server",
    "APIError": "server",
    "MidStreamFallbackError": "cut_stream",
    "APIConnectionError": "connection",
    "LiteLLMUnknownProvider": "configuration",
    # the direct client's (robotlab.llm.direct): Timeout and APIConnectionError share litellm's names
    "MidStreamError": "cut_stream",
}
"""The kind of failure each transport's exception class means, by class name (litellm's and the direct client's).

An exception of another class is known by its HTTP status (:func:`error_kind`), and so is one of litellm's
catch-all ``APIError`` (raised for any status litellm has no class for, a 402 among them).
"""

#: Class names that say less than the HTTP status they come with.
_CATCH_ALL = frozenset({"APIError"})

#: The kind of a failure by its HTTP status, for an exception class :data:`ERROR_KINDS` does not name.
_STATUS_KINDS: dict[int, ProviderErrorKind] = {
    400: "bad_request",
    401: "auth",
    402: "quota",
    403: "permission",
    404: "not_found",
    408: "timeout",
    422: "bad_request",
    429: "rate_limit",
}

#: What the message says of a failure, by its HTTP status (the seed's wording).
_WORDS = {
    429: "rate limited",
    401: "authentication failed",
    403: "permission denied",
    404: "model or endpoint not found",
    408: "timed out",
}


class ProviderFields(TypedDict):
    """The fields :func:`provider_fields` reads off a provider's exception, as :class:`InferenceError` takes them."""

    provider: str | None
    status_code: int | None
    retry_after: float | None
    kind: ProviderErrorKind


class RealRequestBlocked(ConfigurationError):
    """A request to a real provider was attempted while real requests are blocked (in tests)."""


def _is_loopback(api_base: str | None) -> bool:
    if not api_base:
        return False
    host = urlparse(api_base).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_allow_real_requests(model: str | None, api_base: str | None) -> None:
    """Raise :class:`RealRequestBlocked` unless real requests are allowed or the endpoint is local."""
    if ALLOW_REAL_REQUESTS or _is_loopback(api_base):
        return
    raise RealRequestBlocked(
        f"Real LLM request to model {model!r} blocked: tests may not call a real provider. "
        "Give the robot llm=robotlab.testing.FakeLLM(...), point api_base at robotlab.testing.FakeLLMServer, "
        "or wrap the call in robotlab.testing.allow_real_requests()."
    )


def _status(error: BaseException) -> int | None:
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _kind_of(error: BaseException) -> ProviderErrorKind:
    classes = type(error).__mro__
    if classes[0].__name__ in ERROR_KINDS and classes[0].__name__ not in _CATCH_ALL:
        return ERROR_KINDS[classes[0].__name__]
    status = _status(error)
    if status is not None and (status in _STATUS_KINDS or status >= 500):
        return _STATUS_KINDS.get(status, "server")
    for cls in classes:
        if cls.__name__ in ERROR_KINDS:
            return ERROR_KINDS[cls.__name__]
    return "unknown"


def _causes(error: BaseException) -> Iterator[BaseException]:
    seen = {id(error)}
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def error_kind(error: BaseException) -> ProviderErrorKind:
    """What kind of provider failure ``error`` is.

    Its class's name when :data:`ERROR_KINDS` lists it (but for a catch-all such as ``APIError``), else its HTTP
    status (5xx: ``server``), else the name of a class it derives from listed there, else ``unknown``. A ``server``
    or ``unknown`` failure caused by a connection failure or a timeout is that (litellm reports a refused
    connection as an ``InternalServerError``, HTTP 500, caused by the SDK's ``APIConnectionError``).
    """
    kind = _kind_of(error)
    if kind in ("server", "unknown"):
        for cause in _causes(error):
            if isinstance(cause, ConnectionError):
                return "connection"
            named = ERROR_KINDS.get(type(cause).__name__)
            if named in ("connection", "timeout"):
                return named
    return kind


def _retry_after(error: BaseException) -> float | None:
    """The seconds ``error`` asks to wait: its ``retry_after``, else its HTTP response's ``Retry-After`` header."""
    value = getattr(error, "retry_after", None)
    if value is None:
        headers = getattr(getattr(error, "response", None), "headers", None)
        try:
            value = headers.get("retry-after") if headers is not None else None
        except AttributeError:
            value = None
    try:
        return None if value is None else max(0.0, float(value))
    except (TypeError, ValueError):
        return None  # an HTTP date: not worth parsing for a hint


def provider_fields(error: BaseException, provider: str | None = None) -> ProviderFields:
    """The :class:`InferenceError` fields of a provider's exception: provider, HTTP status, retry-after, kind.

    Args:
        error: The transport's exception.
        provider: The provider the request went to, when the caller knows it (else litellm's ``llm_provider``).
    """
    named = provider or getattr(error, "llm_provider", None)
    kind = error_kind(error)
    return {
        "provider": named if isinstance(named, str) and named else None,
        "status_code": None if kind == "cut_stream" else _status(error),
        "retry_after": _retry_after(error),
        "kind": kind,
    }


def error_for(error: Exception, model: str | None, provider: str | None = None) -> InferenceError:
    """The :class:`~robotlab.errors.InferenceError` for a provider failure, its fields set (:func:`provider_fields`).

    Args:
        error: The transport's exception.
        model: The model that was called.
        provider: The provider the request went to, when the transport knows it.
    """
    fields = provider_fields(error, provider)
    status = fields["status_code"]
    text = str(getattr(error, "message", None) or error) or type(error).__name__
    words = "the response stream was interrupted" if fields["kind"] == "cut_stream" else _WORDS.get(status or 0)
    if words is None and status is not None and status >= 500:
        words = "provider error"
    head = f"LLM request to {model!r} failed"
    if words and status:
        head += f": {words} (HTTP {status})"
    elif words:
        head += f": {words}"
    elif status:
        head += f" (HTTP {status})"
    return InferenceError(f"{head}: {type(error).__name__}: {text}", model=model, **fields)
