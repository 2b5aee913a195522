"""What every model transport shares: the :class:`LLM` protocol and the request and response types.

A robot builds an :class:`LLMRequest` (OpenAI-format messages, tool schemas and parameters) and hands
it to any object with the :class:`LLM` protocol's ``complete`` method: the litellm client
(:mod:`robotlab.llm.litellm_client`), the direct OpenAI-compatible client (:mod:`robotlab.llm.direct`)
or a test double (:class:`robotlab.testing.FakeLLM`). Each answers with an :class:`LLMResponse`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["LLM", "LLMRequest", "LLMResponse", "TextCallback", "ToolCallRequest"]

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
    transport: str | None = None
    """``"direct"`` or ``"litellm"``: which transport answered (``None`` for test doubles)."""
    cached_input_tokens: int = 0
    """Input tokens served from the provider's prompt cache, when it reports them (counted in ``input_tokens``)."""

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
