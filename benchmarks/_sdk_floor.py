"""The OpenTelemetry SDK's own share of RobotLab's tracing cost: the same spans made with the bare SDK.

:func:`floor_telemetry` gives stand-ins for :mod:`robotlab.telemetry`'s ``invoke_agent``, ``chat``,
``execute_tool`` and ``tool_failed``: the same spans (names, kinds, nesting, the GenAI attributes a tool round
records, the usage set at the end) and, with a meter provider, the same three measurements per model call,
written as plainly as the SDK allows, with nothing of RobotLab's around them. Swapped into ``robotlab.telemetry``
(:func:`swap`), a tool round then costs what the SDK costs for its spans: the floor no instrumentation can go
under. ``tracing_cost.py`` runs tool rounds with instrumentation off, on, and on the floor, and, with no network,
the five spans of a tool round alone (:func:`spans_alone`).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["floor_telemetry", "spans_alone", "swap"]

NAMES = ("invoke_agent", "execute_tool", "chat", "tool_failed")


def floor_telemetry() -> dict[str, Any]:
    """Bare-SDK stand-ins for :mod:`robotlab.telemetry`'s functions (the global providers must be set first)."""
    from opentelemetry import context, metrics, trace

    tracer = trace.get_tracer("floor")
    meter = metrics.get_meter("floor")
    duration = meter.create_histogram("gen_ai.client.operation.duration", unit="s")
    usage = meter.create_histogram("gen_ai.client.token.usage", unit="{token}")
    client, internal = trace.SpanKind.CLIENT, trace.SpanKind.INTERNAL

    async def invoke_agent(robot_name: str, work: Awaitable[Any], *, model: str | None = None,
                           conversation_id: object = None, run_id: str | None = None,
                           description: str | None = None) -> Any:
        span = tracer.start_span(f"invoke_agent {robot_name}", kind=internal, attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": robot_name, "gen_ai.request.model": model,
            "gen_ai.provider.name": "openai", "robotlab.run.id": run_id})
        token = context.attach(trace.set_span_in_context(span))
        try:
            result = await work
        finally:
            context.detach(token)
        span.set_attributes({"gen_ai.usage.input_tokens": result.input_tokens,
                             "gen_ai.usage.output_tokens": result.output_tokens, "robotlab.usage.cost": result.cost})
        span.end()
        return result

    async def execute_tool(call_id: str, name: str, arguments: str, tool: Any, work: Awaitable[Any]) -> Any:
        span = tracer.start_span(f"execute_tool {name}", kind=internal, attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function", "gen_ai.tool.description": tool.description})
        token = context.attach(trace.set_span_in_context(span))
        try:
            return await work
        finally:
            context.detach(token)
            span.end()

    class Chat:
        def __init__(self, model: str | None) -> None:
            self.attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                               "gen_ai.request.model": model}
            self.span = tracer.start_span(f"chat {model}", kind=client, attributes=self.attributes)
            self.token = context.attach(trace.set_span_in_context(self.span))
            self.started = time.perf_counter()

        def __enter__(self) -> Chat:
            return self

        def __exit__(self, *exc: object) -> None:
            context.detach(self.token)
            self.span.end()

        def first_chunk(self) -> None:
            pass

        def answered(self, response: Any) -> None:
            self.span.set_attributes({
                "gen_ai.usage.input_tokens": response.input_tokens,
                "gen_ai.usage.output_tokens": response.output_tokens,
                "robotlab.usage.cost": response.cost, "gen_ai.response.model": response.model,
                "gen_ai.response.finish_reasons": (response.finish_reason,)})
            attributes = {**self.attributes, "gen_ai.response.model": response.model}
            duration.record(time.perf_counter() - self.started, attributes)
            usage.record(response.input_tokens, {**attributes, "gen_ai.token.type": "input"})
            usage.record(response.output_tokens, {**attributes, "gen_ai.token.type": "output"})

    def chat(llm: object, request: Any, *, streamed: bool) -> Chat:
        return Chat(request.model)

    def tool_failed(error: BaseException) -> None:
        pass

    return {"invoke_agent": invoke_agent, "execute_tool": execute_tool, "chat": chat, "tool_failed": tool_failed}


@contextmanager
def swap(functions: dict[str, Any]) -> Iterator[None]:
    """Put ``functions`` in :mod:`robotlab.telemetry` for the block (the core calls them through the module)."""
    from robotlab import telemetry

    saved = {name: getattr(telemetry, name) for name in NAMES}
    for name, function in functions.items():
        setattr(telemetry, name, function)
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(telemetry, name, function)


class _Tool:
    description = "Current weather for a location."


class _Result:
    input_tokens, output_tokens, cost = 30, 12, 0.0002


def _round(model: str) -> Callable[[], Awaitable[None]]:
    """The telemetry calls of one tool round, in the order the core makes them, around no work at all."""
    from robotlab import telemetry
    from robotlab.llm.types import LLMRequest, LLMResponse

    request = LLMRequest(model=model, messages=[{"role": "user", "content": "hi"}])
    response = LLMResponse(input_tokens=10, output_tokens=5, cost=0.0001, finish_reason="tool_calls",
                           model="gpt-4o-mini-2024-07-18")
    tool = _Tool()

    async def nothing(value: Any = None) -> Any:
        return value

    async def agent() -> _Result:
        for index in range(2):
            with telemetry.chat(None, request, streamed=False) as chat:
                await nothing()
                if chat is not None:
                    chat.answered(response)
            if index == 0:
                for call_id, name in (("call_1", "get_weather"), ("call_2", "get_time")):
                    await telemetry.execute_tool(call_id, name, "{}", tool, nothing("sunny"))
        return _Result()

    async def one() -> None:
        await telemetry.invoke_agent("bench", agent(), model=model, run_id="0123456789abcdef")

    return one


def spans_alone(model: str, runs: int = 1000, rounds: int = 15) -> dict[str, float]:
    """CPU us of a tool round's telemetry calls alone (no network, no model, no tools): instrumentation off,
    :mod:`robotlab.telemetry`, and the bare-SDK floor, in rotated batches of ``runs`` (medians of ``rounds``)."""
    import robotlab

    one = _round(model)
    floor = floor_telemetry()

    async def batch(arm: str) -> float:
        robotlab.configure(instrument=arm != "off")
        with swap(floor if arm == "floor" else {}):
            start = time.process_time()
            for _ in range(runs):
                await one()
            return (time.process_time() - start) / runs * 1e6

    async def measure() -> dict[str, float]:
        arms = ["off", "robotlab", "floor"]
        seen: dict[str, list[float]] = {arm: [] for arm in arms}
        for arm in arms:
            await batch(arm)  # warm up
        for index in range(rounds):
            for arm in arms[index % 3:] + arms[: index % 3]:
                seen[arm].append(await batch(arm))
        robotlab.configure(instrument=True)
        return {arm: statistics.median(values) for arm, values in seen.items()}

    return asyncio.run(measure())
