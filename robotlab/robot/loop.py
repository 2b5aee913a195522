"""The run loop: LLM -> tools -> LLM, until the model answers without tool calls.

A run is handed everything it needs in a :class:`~robotlab.robot.request.RunRequest` (the conversation to
extend, the model and its client, the tools, the callbacks, the limits and the robot's
:class:`~robotlab.budget.Budget`);
:func:`run_loop` drives it. The loop enforces the circuit breaker (``max_tool_rounds`` counts tool
calls), the always-on doom-loop detector and the budgets after every LLM response, and keeps the
chat history valid even when it stops a run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import streaming, telemetry
from ..attachments import content_parts
from ..doom_loop import DoomLoopDetector
from ..errors import ToolLoopError
from ..llm import LLMRequest, LLMResponse, ToolCallRequest
from ..messages import TextMessage, ToolMessage, ToolResultMessage
from ..result import RobotResult
from ..streaming import Chunk
from .request import RunRequest, RunUsage, ToolCall, parse_arguments, tool_result_text

if TYPE_CHECKING:
    from ..budget import SharedBudget
    from ..tools import Tool

__all__ = ["run_loop"]


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
    chat_span: telemetry.ChatSpan | None = None
    """The traced model call awaiting its first streamed chunk (``None`` once it came, or when not traced)."""

    def _emit(self, kind: str, **data: object) -> None:
        if self.request.emitter is not None:
            self.request.emitter.emit(kind, **data)

    def _on_text(self, text: str) -> None:
        if self.chat_span is not None:  # once per call: the time to its first chunk
            self.chat_span.first_chunk()
            self.chat_span = None
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
            response = await self._complete(llm_request, streams)
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

    async def _complete(self, llm_request: LLMRequest, streams: bool) -> LLMResponse:
        """One LLM call, inside a reservation of its estimate in every shared (network) budget of the run."""
        request = self.request
        held: list[tuple[SharedBudget, dict[str, Any]]] = []
        tokens, cost = 0, 0.0
        try:
            for shared in request.shared_budgets:
                held.append((shared, await shared.areserve_call(llm_request)))
            with telemetry.chat(request.llm, llm_request, streamed=streams) as traced:
                self.chat_span = traced if streams else None
                response = await request.llm.complete(llm_request, on_text=self._on_text if streams else None)
                self.chat_span = None
                if traced is not None:
                    traced.answered(response)
            tokens, cost = response.input_tokens + response.output_tokens, response.cost
            return response
        finally:
            for shared, reservations in held:
                shared.settle_call(reservations, tokens=tokens, cost=cost)

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
        for shared in self.request.shared_budgets:  # each call was settled into the shared ledger as it ended
            shared.check(tokens=0, cost=0.0)

    async def _call_tool(self, call: ToolCallRequest, by_name: dict[str, Tool], detector: DoomLoopDetector) -> None:
        request = self.request
        arguments = parse_arguments(call.arguments)
        public = ToolCall(id=call.id, name=call.name, arguments=arguments)
        self._emit(streaming.TOOL_CALL_STARTED, id=call.id, name=call.name, arguments=arguments)
        for callback in request.callbacks.tool_call:
            callback(public)
        tool = by_name.get(call.name)
        if tool is None:
            available = ", ".join(sorted(by_name)) or "none"
            value: Any = f"Error ({call.name}): unknown tool '{call.name}'. Available tools: {available}"
        else:
            value = await telemetry.execute_tool(call.id, call.name, call.arguments, tool, tool.acall(call.arguments))
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
