"""The run loop: LLM -> tools -> LLM, until the model answers without tool calls.

A run is handed everything it needs in a :class:`RunRequest` (the conversation to extend, the
model and its client, the tools, the callbacks, the limits and the robot's :class:`~robotlab.budget.Budget`);
:func:`run_loop` drives it. The loop enforces the circuit breaker (``max_tool_rounds`` counts tool
calls), the always-on doom-loop detector and the budgets after every LLM response, and keeps the
chat history valid even when it stops a run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import streaming
from .attachments import Attachment, content_parts
from .doom_loop import DoomLoopDetector
from .errors import ToolLoopError
from .llm import LLM, LLMRequest, LLMResponse, ToolCallRequest
from .messages import TextMessage, ToolMessage, ToolResultMessage
from .result import RobotResult
from .streaming import Chunk, EventEmitter

if TYPE_CHECKING:
    from .budget import Budget, SharedBudget
    from .conversation import Conversation
    from .tools import Tool

__all__ = ["RunCallbacks", "RunRequest", "RunUsage", "ToolCall", "run_loop", "tool_result_text"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as given to ``on_tool_call``: the id, the tool name and the parsed arguments."""

    id: str
    name: str
    arguments: dict[str, Any] | str


def tool_result_text(value: Any) -> str:
    """A tool's return value as the text sent back to the model."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _parse_arguments(text: str) -> dict[str, Any] | str:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


@dataclass
class RunCallbacks:
    """The callbacks of a run: text chunks, tool calls (before they run) and tool results."""

    content: list[Callable[[Chunk], Any]] = field(default_factory=list)
    tool_call: list[Callable[..., Any]] = field(default_factory=list)
    tool_result: list[Callable[..., Any]] = field(default_factory=list)


@dataclass
class RunRequest:
    """What one run needs, handed to :func:`run_loop` by the robot."""

    robot_name: str
    conversation: Conversation
    request_text: str | None
    llm: LLM
    model: str | None
    params: dict[str, Any]
    tools: Sequence[Tool]
    budget: Budget
    callbacks: RunCallbacks = field(default_factory=RunCallbacks)
    emitter: EventEmitter | None = None
    max_tool_rounds: int | None = None
    doom_loop_threshold: int | None = None
    shared_budgets: Sequence[SharedBudget] = ()
    attachments: Sequence[Attachment] = ()


@dataclass
class RunUsage:
    """What a run has used so far."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


async def run_loop(request: RunRequest, usage: RunUsage | None = None) -> RobotResult:
    """Run ``request``'s conversation to the model's answer; ``usage`` (if given) is kept up to date."""
    return await _Run(request, usage if usage is not None else RunUsage()).execute()


@dataclass
class _Run:
    request: RunRequest
    usage: RunUsage
    tool_call_count: int = 0
    tool_results: list[ToolResultMessage] = field(default_factory=list)
    history_start: int = 0

    def _emit(self, kind: str, **data: Any) -> None:
        if self.request.emitter is not None:
            self.request.emitter.emit(kind, **data)

    def _on_text(self, text: str) -> None:
        chunk = Chunk(content=text)
        for callback in self.request.callbacks.content:
            callback(chunk)
        self._emit(streaming.TEXT_DELTA, text=text)

    async def execute(self) -> RobotResult:
        """Run the loop and build the result."""
        request = self.request
        started = time.monotonic()
        conversation = request.conversation
        messages = conversation.messages
        self.history_start = len(messages)
        if request.attachments:  # the user message as content parts: its text, then each attachment
            messages.append({"role": "user", "content": content_parts(request.request_text, request.attachments)})
        elif request.request_text is not None:
            messages.append({"role": "user", "content": request.request_text})
        by_name = {tool.name: tool for tool in request.tools}
        schemas = [tool.to_json_schema() for tool in request.tools]
        detector = DoomLoopDetector(threshold=request.doom_loop_threshold or DoomLoopDetector.DEFAULT_THRESHOLD)
        streams = bool(request.callbacks.content) or request.emitter is not None
        response = LLMResponse()
        limit = request.max_tool_rounds
        while True:
            llm_request = LLMRequest(
                model=request.model, messages=conversation.for_request(), tools=schemas, params=request.params
            )
            response = await request.llm.complete(llm_request, on_text=self._on_text if streams else None)
            self._account(response)
            messages.append(response.to_message())
            if not response.tool_calls:
                break
            for index, call in enumerate(response.tool_calls):
                self.tool_call_count += 1
                if limit is not None and self.tool_call_count > limit:
                    error = ToolLoopError(
                        f"Circuit breaker triggered: {self.tool_call_count} tool calls exceeded "
                        f"max_tool_rounds ({limit})",
                        robot_name=request.robot_name, limit=limit, usage=self.tool_call_count, model=request.model,
                    )
                    messages.extend(
                        {"role": "tool", "tool_call_id": pending.id, "name": pending.name, "content": f"Error: {error}"}
                        for pending in response.tool_calls[index:]
                    )
                    raise error
                await self._call_tool(call, by_name, detector)
        return self._result(response, time.monotonic() - started)

    def _account(self, response: LLMResponse) -> None:
        usage = self.usage
        usage.input_tokens += response.input_tokens
        usage.output_tokens += response.output_tokens
        usage.cost += response.cost
        self.request.budget.record(response.input_tokens, response.output_tokens)
        self._emit(
            streaming.USAGE_UPDATED, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
            cost=usage.cost,
        )
        self.request.budget.check(usage.cost)
        for shared in self.request.shared_budgets:
            shared.check(tokens=usage.input_tokens + usage.output_tokens, cost=usage.cost)

    async def _call_tool(self, call: ToolCallRequest, by_name: dict[str, Tool], detector: DoomLoopDetector) -> None:
        request = self.request
        arguments = _parse_arguments(call.arguments)
        public = ToolCall(id=call.id, name=call.name, arguments=arguments)
        self._emit(streaming.TOOL_CALL_STARTED, id=call.id, name=call.name, arguments=arguments)
        for callback in request.callbacks.tool_call:
            callback(public)
        tool = by_name.get(call.name)
        if tool is None:
            available = ", ".join(sorted(by_name)) or "none"
            value: Any = f"Error ({call.name}): unknown tool '{call.name}'. Available tools: {available}"
        else:
            value = await tool.acall(call.arguments)
        detector.track(call.name)
        if detector.is_doom_loop:
            warning = detector.warning_message
            detector.reset()
            if isinstance(value, str):
                value = f"{value}\n\n⚠️ {warning}"
            elif isinstance(value, dict):
                value = {**value, "_doom_loop_warning": warning}
        for callback in request.callbacks.tool_result:
            callback(value)
        text = tool_result_text(value)
        is_error = isinstance(value, str) and value.startswith(f"Error ({call.name}):")
        self._emit(streaming.TOOL_CALL_COMPLETED, id=call.id, name=call.name, result=text, is_error=is_error)
        request.conversation.messages.append(
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text}
        )
        self.tool_results.append(
            ToolResultMessage(
                tool=ToolMessage(id=call.id, name=call.name, input=arguments if isinstance(arguments, dict) else {}),
                content={"error": text} if is_error else {"data": value},
            )
        )

    def _reply_text(self, response: LLMResponse) -> str | None:
        if response.content:
            return response.content
        if response.thinking:
            return response.thinking
        for message in reversed(self.request.conversation.messages[self.history_start :]):
            if message.get("role") == "user":
                break
            if message.get("role") == "assistant" and isinstance(message.get("content"), str) and message["content"]:
                return str(message["content"])
        return None

    def _result(self, response: LLMResponse, duration: float) -> RobotResult:
        text = self._reply_text(response)
        stop = "stop" if response.finish_reason in (None, "stop") else None
        output = [TextMessage(role="assistant", content=text, stop_reason=stop)] if text is not None else []
        return RobotResult(
            robot_name=self.request.robot_name,
            output=output,
            tool_calls=self.tool_results,
            stop_reason=response.finish_reason,
            input_tokens=self.usage.input_tokens,
            output_tokens=self.usage.output_tokens,
            cost=self.usage.cost,
            model=response.model or self.request.model,
            transport=response.transport,
            duration=duration,
        )
