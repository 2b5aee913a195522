"""LLM access: the one module that imports litellm.

:class:`LLMClient` wraps ``litellm.acompletion`` (streaming and not) and maps its answer
into :class:`LLMResponse`: text, tool calls, token usage and cost. Errors become
:class:`~robotlab.InferenceError`. Anything with the same ``complete`` method can stand in
for it, which is how :class:`robotlab.testing.FakeLLM` works.

litellm is imported on first use, never at ``import robotlab``: it takes seconds. Before it
is imported, ``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` so the import never waits
on the network for a price map (set it to ``False`` yourself to fetch a fresh one).
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlparse

from .errors import ConfigurationError, InferenceError

__all__ = [
    "ALLOW_REAL_REQUESTS",
    "LLM",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "RealRequestBlocked",
    "TextCallback",
    "ToolCallRequest",
    "check_allow_real_requests",
    "load_litellm",
]

#: Set to ``False`` (the pytest plugin does) to make every request to a non-loopback
#: provider raise :class:`RealRequestBlocked`.
ALLOW_REAL_REQUESTS = True

TextCallback = Callable[[str], None]
"""Receives each streamed text delta."""


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call the model asked for; ``arguments`` is the model's raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"

    def to_dict(self) -> dict[str, Any]:
        """The call in the OpenAI message format."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(slots=True)
class LLMRequest:
    """What a robot sends to the model: OpenAI-format messages, tool schemas and parameters."""

    model: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LLMResponse:
    """The model's answer to one request."""

    content: str | None = None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    finish_reason: str | None = None
    model: str | None = None
    thinking: str | None = None
    raw: Any = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message to append to the chat history."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        return message


@runtime_checkable
class LLM(Protocol):
    """Anything a robot can send requests to."""

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Answer ``request``; when ``on_text`` is given, stream and call it with each text delta."""
        ...


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


_litellm_lock = threading.Lock()
_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm once, quietly and without fetching its price map."""
    global _litellm
    if _litellm is None:
        with _litellm_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.drop_params = True
                _litellm = litellm
    return _litellm


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _error_for(error: Exception, model: str | None) -> InferenceError:
    status = getattr(error, "status_code", None)
    text = str(getattr(error, "message", None) or error) or type(error).__name__
    kind = {
        429: "rate limited",
        401: "authentication failed",
        403: "permission denied",
        404: "model or endpoint not found",
        408: "timed out",
    }.get(status or 0)
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


class LLMClient:
    """The litellm-backed :class:`LLM`.

    Args:
        api_base: Endpoint override (an OpenAI-compatible server, a proxy, Ollama).
        api_key: Key override; by default litellm reads the provider's environment variable.
        timeout: Seconds per request.
        num_retries: litellm's retries (the only retry layer). The provider SDK's own
            retries are turned off so attempts never multiply.
        extra: Any other keyword passed to ``litellm.acompletion`` on every call.
    """

    def __init__(
        self,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        num_retries: int | None = None,
        **extra: Any,
    ) -> None:
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.num_retries = num_retries
        self.extra = extra

    def __repr__(self) -> str:
        return f"LLMClient(api_base={self.api_base!r})"

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": request.model, "messages": request.messages, "max_retries": 0}
        if request.tools:
            kwargs["tools"] = request.tools
        for name, value in (
            ("api_base", self.api_base),
            ("api_key", self.api_key),
            ("timeout", self.timeout),
            ("num_retries", self.num_retries),
        ):
            if value is not None:
                kwargs[name] = value
        kwargs.update(self.extra)
        kwargs.update(request.params)
        return kwargs

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Send ``request`` through litellm; stream when ``on_text`` is given."""
        if not request.model:
            raise ConfigurationError(
                "No model set for this request: pass model= to robotlab.build or set ROBOT_LAB_MODEL"
            )
        check_allow_real_requests(request.model, self.api_base)
        litellm = load_litellm()
        kwargs = self._kwargs(request)
        try:
            if on_text is None:
                response = await litellm.acompletion(**kwargs)
                return self._parse(response, request.model)
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
            stream = await litellm.acompletion(**kwargs)
            return await self._consume(stream, request.model, on_text)
        except (InferenceError, ConfigurationError):
            raise
        except Exception as exc:
            raise _error_for(exc, request.model) from exc

    @staticmethod
    def _cost(model: str, input_tokens: int, output_tokens: int, known: Any = None) -> float:
        if isinstance(known, int | float) and (known or not (input_tokens or output_tokens)):
            return float(known)  # litellm already priced the response
        litellm = load_litellm()
        try:
            prompt, completion = litellm.cost_per_token(
                model=model, prompt_tokens=input_tokens, completion_tokens=output_tokens
            )
            return float(prompt + completion)
        except Exception:  # unknown models have no price
            return 0.0

    def _parse(self, response: Any, model: str) -> LLMResponse:
        choice = response.choices[0]
        message = choice.message
        calls = [
            ToolCallRequest(
                id=call.id or f"call_{index}", name=call.function.name or "", arguments=call.function.arguments or "{}"
            )
            for index, call in enumerate(message.tool_calls or [])
        ]
        usage = _field(response, "usage")
        input_tokens = int(_field(usage, "prompt_tokens", 0) or 0)
        output_tokens = int(_field(usage, "completion_tokens", 0) or 0)
        return LLMResponse(
            content=message.content,
            tool_calls=calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=self._cost(model, input_tokens, output_tokens,
                            (getattr(response, "_hidden_params", None) or {}).get("response_cost")),
            finish_reason=choice.finish_reason,
            model=_field(response, "model") or model,
            thinking=_field(message, "reasoning_content"),
            raw=response,
        )

    async def _consume(self, stream: Any, model: str, on_text: TextCallback) -> LLMResponse:
        parts: list[str] = []
        thinking: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish_reason = None
        usage = None
        response_model = None
        async for chunk in stream:
            response_model = response_model or _field(chunk, "model")
            chunk_usage = _field(chunk, "usage")
            if chunk_usage is not None and _field(chunk_usage, "prompt_tokens"):
                usage = chunk_usage
            for choice in _field(chunk, "choices") or ():
                delta = _field(choice, "delta")
                finish_reason = _field(choice, "finish_reason") or finish_reason
                text = _field(delta, "content")
                if text:
                    parts.append(text)
                    on_text(text)
                reasoning = _field(delta, "reasoning_content")
                if reasoning:
                    thinking.append(reasoning)
                for call in _field(delta, "tool_calls") or ():
                    slot = calls.setdefault(
                        _field(call, "index", len(calls)) or 0, {"id": None, "name": "", "args": []}
                    )
                    slot["id"] = slot["id"] or _field(call, "id")
                    function = _field(call, "function")
                    slot["name"] += _field(function, "name") or ""
                    slot["args"].append(_field(function, "arguments") or "")
        tool_calls = [
            ToolCallRequest(
                id=slot["id"] or f"call_{index}", name=slot["name"], arguments="".join(slot["args"]) or "{}"
            )
            for index, slot in sorted(calls.items())
        ]
        input_tokens = int(_field(usage, "prompt_tokens", 0) or 0)
        output_tokens = int(_field(usage, "completion_tokens", 0) or 0)
        return LLMResponse(
            content="".join(parts) if parts or not tool_calls else None,
            tool_calls=tool_calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=self._cost(model, input_tokens, output_tokens, _field(usage, "cost")),
            finish_reason=finish_reason,
            model=response_model or model,
            thinking="".join(thinking) or None,
        )


