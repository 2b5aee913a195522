"""The litellm transport: :class:`LLMClient` sends requests through ``litellm.acompletion``.

It streams or not, and maps litellm's answer into :class:`~robotlab.llm.types.LLMResponse`: text, tool
calls, token usage and cost. Errors become :class:`~robotlab.InferenceError`. litellm translates
between providers, so any model litellm knows works here; for an OpenAI-compatible server the direct
client (:mod:`robotlab.llm.direct`) costs less CPU per call.

litellm is imported on first use (:func:`~robotlab.llm.load_litellm`), never at ``import robotlab``.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError, InferenceError
from . import pricing
from ._litellm import litellm_places, load_litellm
from .guard import check_allow_real_requests, error_for
from .types import LLMRequest, LLMResponse, TextCallback, ToolCallRequest

__all__ = ["LLMClient"]


def _field(obj: object, name: str, default: object = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _cached_tokens(usage: object) -> int:
    """Input tokens served from the provider's prompt cache (litellm reports them as OpenAI does)."""
    return int(_field(_field(usage, "prompt_tokens_details"), "cached_tokens", 0) or 0)


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
        model = str(request.model)
        if self.api_base and "custom_llm_provider" not in kwargs and not litellm_places(model, self.api_base):
            # a server's own id (Qwen/Qwen2.5-7B-Instruct): OpenAI-compatible at api_base, its name sent as written
            kwargs["custom_llm_provider"] = "hosted_vllm"
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
            raise error_for(exc, request.model) from exc

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
            cost=pricing.cost(model, input_tokens, output_tokens,
                              (getattr(response, "_hidden_params", None) or {}).get("response_cost")),
            finish_reason=choice.finish_reason,
            model=_field(response, "model") or model,
            thinking=_field(message, "reasoning_content"),
            raw=response,
            transport="litellm",
            cached_input_tokens=_cached_tokens(usage),
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
            cost=pricing.cost(model, input_tokens, output_tokens, _field(usage, "cost")),
            finish_reason=finish_reason,
            model=response_model or model,
            thinking="".join(thinking) or None,
            transport="litellm",
            cached_input_tokens=_cached_tokens(usage),
        )


