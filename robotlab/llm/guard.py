"""What every model transport does around a request: the guard against real providers, and failures.

* Before a request, :func:`check_allow_real_requests` raises :class:`RealRequestBlocked` when real
  requests are blocked (the pytest plugin blocks them in every test) and the endpoint is not loopback.
* When a request fails, :func:`error_for` turns the provider's exception into an
  :class:`~robotlab.errors.InferenceError` that names the model, the kind of failure and the HTTP status.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlparse

from ..errors import ConfigurationError, InferenceError

__all__ = ["ALLOW_REAL_REQUESTS", "RealRequestBlocked", "check_allow_real_requests", "error_for"]

#: Set to ``False`` (the pytest plugin does) to make every request to a non-loopback
#: provider raise :class:`RealRequestBlocked`. ``robotlab.llm.ALLOW_REAL_REQUESTS`` reads and sets it.
ALLOW_REAL_REQUESTS = True

_KINDS = {
    429: "rate limited",
    401: "authentication failed",
    403: "permission denied",
    404: "model or endpoint not found",
    408: "timed out",
}


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


def error_for(error: Exception, model: str | None) -> InferenceError:
    """The :class:`~robotlab.errors.InferenceError` for a provider failure (its ``status_code`` kept)."""
    status = getattr(error, "status_code", None)
    text = str(getattr(error, "message", None) or error) or type(error).__name__
    kind = _KINDS.get(status or 0)
    if "MidStream" in type(error).__name__:
        kind, status = "the response stream was interrupted", None
    elif kind is None and isinstance(status, int) and status >= 500:
        kind = "provider error"
    head = f"LLM request to {model!r} failed"
    if kind and status:
        head += f": {kind} (HTTP {status})"
    elif kind:
        head += f": {kind}"
    elif status:
        head += f" (HTTP {status})"
    inference = InferenceError(f"{head}: {type(error).__name__}: {text}")
    inference.status_code = status  # type: ignore[attr-defined]
    return inference
