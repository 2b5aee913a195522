"""FakeLLM and FunctionLLM: in-process stand-ins for a model.

``FakeLLM`` answers from a script of steps and records every request it received::

    llm = FakeLLM([tool_call("get_weather", location="Paris"), text("It is sunny.")])
    robot = robotlab.build(name="weather", llm=llm, local_tools=[get_weather])
    assert robot.run("Weather in Paris?").reply == "It is sunny."
    assert llm.requests[1].messages[-1]["role"] == "tool"

When the script runs out it raises :class:`FakeLLMExhausted`, so a test fails loudly.
"""

from __future__ import annotations

import inspect
import itertools
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..llm import LLMRequest, LLMResponse, TextCallback, ToolCallRequest

__all__ = ["FakeLLM", "FakeLLMExhausted", "FunctionLLM", "Step", "raise_", "text", "tool_call", "tool_calls"]


class FakeLLMExhausted(AssertionError):
    """The FakeLLM was asked for more replies than its script holds."""


@dataclass(frozen=True)
class Step:
    """One scripted model reply: text and/or tool calls, usage, or an error to raise."""

    content: str | None = None
    calls: tuple[ToolCallRequest, ...] = ()
    usage: tuple[int, int] | None = None
    cost: float = 0.0
    error: BaseException | None = None
    finish_reason: str | None = None
    thinking: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


_ids = itertools.count(1)


def text(
    content: str,
    *,
    usage: tuple[int, int] | None = None,
    cost: float = 0.0,
    finish_reason: str = "stop",
    thinking: str | None = None,
) -> Step:
    """A text reply; ``usage`` is ``(input_tokens, output_tokens)``."""
    return Step(content=content, usage=usage, cost=cost, finish_reason=finish_reason, thinking=thinking)


def tool_call(
    name: str,
    *,
    id: str | None = None,
    raw_arguments: str | None = None,
    usage: tuple[int, int] | None = None,
    cost: float = 0.0,
    **arguments: object,
) -> Step:
    """A reply that calls one tool; ``raw_arguments`` sends exact (possibly invalid) JSON text."""
    return tool_calls((name, arguments, id, raw_arguments), usage=usage, cost=cost)


def tool_calls(
    *calls: tuple[Any, ...] | str, content: str | None = None, usage: tuple[int, int] | None = None, cost: float = 0.0
) -> Step:
    """A reply with several tool calls: each a name, or ``(name, arguments[, id[, raw_arguments]])``."""
    built = []
    for call in calls:
        name, arguments, call_id, raw = (call, {}, None, None) if isinstance(call, str) else (*call, None, None)[:4]
        built.append(
            ToolCallRequest(
                id=call_id or f"call_{next(_ids)}",
                name=name,
                arguments=raw if raw is not None else json.dumps(arguments or {}),
            )
        )
    return Step(content=content, calls=tuple(built), usage=usage, cost=cost, finish_reason="tool_calls")


def raise_(error: BaseException) -> Step:
    """A step that raises ``error`` instead of answering."""
    return Step(error=error)


def _estimate(request: LLMRequest, step: Step) -> tuple[int, int]:
    if step.usage is not None:
        return step.usage
    prompt = sum(len(str(m.get("content") or "")) for m in request.messages)
    return max(1, prompt // 4), max(1, len(step.content or "") // 4 + 8 * len(step.calls))


def _pieces(content: str) -> list[str]:
    return re.findall(r"\S*\s*", content)[:-1] or [content]


class FakeLLM:
    """A scripted model.

    Steps are :func:`text`, :func:`tool_call`, :func:`tool_calls`, :func:`raise_` or plain strings (text replies).

    Args:
        script: The replies, in order.
        default: A reply used whenever the script is empty (instead of raising).
    """

    def __init__(self, script: Iterable[Step | str] = (), *, default: Step | str | None = None) -> None:
        self._script: list[Step] = [self._coerce(s) for s in script]
        self.default = None if default is None else self._coerce(default)
        self.requests: list[LLMRequest] = []
        self._lock = threading.Lock()

    @staticmethod
    def _coerce(step: Step | str) -> Step:
        return text(step) if isinstance(step, str) else step

    def push(self, *steps: Step | str) -> FakeLLM:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(self._coerce(s) for s in steps)
        return self

    @property
    def remaining(self) -> int:
        """How many scripted replies are left."""
        return len(self._script)

    def _next(self, request: LLMRequest) -> Step:
        with self._lock:
            self.requests.append(request)
            if self._script:
                return self._script.pop(0)
            if self.default is not None:
                return self.default
        raise FakeLLMExhausted(
            f"FakeLLM script exhausted after {len(self.requests) - 1} request(s); add steps for request "
            f"{len(self.requests)} (last message: {request.messages[-1] if request.messages else None!r})"
        )

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Answer with the next scripted step, streaming its text in word pieces when asked."""
        step = self._next(request)
        if step.error is not None:
            raise step.error
        if on_text is not None and step.content:
            for piece in _pieces(step.content):
                on_text(piece)
        input_tokens, output_tokens = _estimate(request, step)
        return LLMResponse(
            content=step.content,
            tool_calls=list(step.calls),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost=step.cost,
            finish_reason=step.finish_reason or "stop",
            model=request.model or "fake",
            thinking=step.thinking,
        )


class FunctionLLM:
    """A model made of a function ``fn(request) -> LLMResponse | Step | str`` (sync or async)."""

    def __init__(self, fn: Callable[[LLMRequest], Any]) -> None:
        self.fn = fn
        self.requests: list[LLMRequest] = []

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Call the function and stream its text when asked."""
        self.requests.append(request)
        answer = self.fn(request)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, LLMResponse):
            if on_text is not None and answer.content:
                for piece in _pieces(answer.content):
                    on_text(piece)
            return answer
        fake = FakeLLM([answer])
        return await fake.complete(request, on_text=on_text)
