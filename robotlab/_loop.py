"""The run loop: LLM -> tools -> LLM, until the model answers without tool calls.

One :class:`RunState` per ``Robot.arun`` call. It enforces the circuit breaker
(``max_tool_rounds`` counts tool calls), the always-on doom-loop detector and the budgets
after every LLM response, and keeps the chat history valid even when it stops a run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import streaming
from .doom_loop import DoomLoopDetector
from .errors import InferenceError, ToolLoopError
from .llm import LLMRequest, LLMResponse, ToolCallRequest
from .messages import TextMessage, ToolMessage, ToolResultMessage
from .result import RobotResult
from .streaming import Chunk, EventEmitter

if TYPE_CHECKING:
    from .robot import Robot
    from .tools import Tool

__all__ = ["RunState", "ToolCall", "tool_result_text"]


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
class RunState:
    """Everything one run needs; :meth:`execute` drives the loop."""

    robot: Robot
    request_text: str | None
    tools: Sequence[Tool]
    model: str | None
    params: dict[str, Any]
    content_callbacks: Sequence[Callable[[Chunk], Any]]
    emitter: EventEmitter | None = None
    max_tool_rounds: int | None = None
    doom_loop_threshold: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    tool_call_count: int = 0
    tool_results: list[ToolResultMessage] = field(default_factory=list)
    history_start: int = 0

    def _emit(self, kind: str, **data: Any) -> None:
        if self.emitter is not None:
            self.emitter.emit(kind, **data)

    def _on_text(self, text: str) -> None:
        chunk = Chunk(content=text)
        for callback in self.content_callbacks:
            callback(chunk)
        self._emit(streaming.TEXT_DELTA, text=text)

    @property
    def streams(self) -> bool:
        """Whether anyone listens to text deltas."""
        return bool(self.content_callbacks) or self.emitter is not None

    async def execute(self) -> RobotResult:
        """Run the loop and build the result."""
        robot = self.robot
        started = time.monotonic()
        messages = robot._messages
        self.history_start = len(messages)
        if self.request_text is not None:
            messages.append({"role": "user", "content": self.request_text})
        by_name = {tool.name: tool for tool in self.tools}
        schemas = [tool.to_json_schema() for tool in self.tools]
        detector = DoomLoopDetector(threshold=self.doom_loop_threshold or DoomLoopDetector.DEFAULT_THRESHOLD)
        llm = robot.llm
        response = LLMResponse()
        while True:
            request = LLMRequest(
                model=self.model, messages=robot._request_messages(), tools=schemas, params=self.params
            )
            response = await llm.complete(request, on_text=self._on_text if self.streams else None)
            self._account(response)
            messages.append(response.to_message())
            if not response.tool_calls:
                break
            for index, call in enumerate(response.tool_calls):
                self.tool_call_count += 1
                if self.max_tool_rounds is not None and self.tool_call_count > self.max_tool_rounds:
                    error = ToolLoopError(
                        f"Circuit breaker triggered: {self.tool_call_count} tool calls exceeded "
                        f"max_tool_rounds ({self.max_tool_rounds})"
                    )
                    for pending in response.tool_calls[index:]:
                        messages.append(
                            {
                                "role": "tool",
                                "tool_call_id": pending.id,
                                "name": pending.name,
                                "content": f"Error: {error}",
                            }
                        )
                    raise error
                await self._call_tool(call, by_name, detector)
        return self._result(response, time.monotonic() - started)

    def _account(self, response: LLMResponse) -> None:
        robot = self.robot
        self.input_tokens += response.input_tokens
        self.output_tokens += response.output_tokens
        self.cost += response.cost
        robot.total_input_tokens += response.input_tokens
        robot.total_output_tokens += response.output_tokens
        self._emit(
            streaming.USAGE_UPDATED, input_tokens=self.input_tokens, output_tokens=self.output_tokens, cost=self.cost
        )
        robot._check_budgets(self.cost)

    async def _call_tool(self, call: ToolCallRequest, by_name: dict[str, Tool], detector: DoomLoopDetector) -> None:
        robot = self.robot
        arguments = _parse_arguments(call.arguments)
        public = ToolCall(id=call.id, name=call.name, arguments=arguments)
        self._emit(streaming.TOOL_CALL_STARTED, id=call.id, name=call.name, arguments=arguments)
        for callback in robot._tool_call_callbacks:
            callback(public)
        tool = by_name.get(call.name)
        if tool is None:
            available = ", ".join(sorted(by_name)) or "none"
            value: Any = f"Error ({call.name}): unknown tool '{call.name}'. Available tools: {available}"
        else:
            value = await robot._invoke_tool(tool, call.arguments)
        detector.track(call.name)
        if detector.is_doom_loop:
            warning = detector.warning_message
            detector.reset()
            if isinstance(value, str):
                value = f"{value}\n\n⚠️ {warning}"
            elif isinstance(value, dict):
                value = {**value, "_doom_loop_warning": warning}
        for callback in robot._tool_result_callbacks:
            callback(value)
        text = tool_result_text(value)
        is_error = isinstance(value, str) and value.startswith(f"Error ({call.name}):")
        self._emit(streaming.TOOL_CALL_COMPLETED, id=call.id, name=call.name, result=text, is_error=is_error)
        robot._messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text})
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
        for message in reversed(self.robot._messages[self.history_start :]):
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
            robot_name=self.robot.name,
            output=output,
            tool_calls=self.tool_results,
            stop_reason=response.finish_reason,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            cost=self.cost,
            model=response.model or self.model,
            transport=response.transport,
            duration=duration,
        )


def raise_budget(kind: str, used: float, budget: float) -> None:
    """Raise the seed's budget message for ``kind`` (``tokens`` or ``cost``)."""
    if kind == "tokens":
        raise InferenceError(f"Token budget exceeded: {int(used)} tokens used, budget is {int(budget)}")
    raise InferenceError(f"Cost budget exceeded: ${used:.6f} used, budget is ${budget:.6f}")
