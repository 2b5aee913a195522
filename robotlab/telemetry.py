"""OpenTelemetry spans and metrics of every run, by the GenAI semantic conventions.

Spans go through the global tracer provider, metrics through the global meter provider, under the
instrumentation scope ``robotlab``. Until an application installs an SDK (``opentelemetry-sdk``) both are
no-ops of ``opentelemetry-api``; this module imports even that only when the first run is traced.

* ``invoke_agent {robot}`` per robot run (:func:`invoke_agent`), ``chat {model}`` per model call under it
  (:func:`chat`), ``execute_tool {tool}`` per tool call, MCP tools included (:func:`execute_tool`);
* ``invoke_workflow {network}`` per network run (:func:`invoke_workflow`), each task's ``invoke_agent`` below;
  a robot delegated to from a tool runs below that tool's ``execute_tool``;
* the ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration`` histograms, per model call.

A failure sets the span's status to ERROR and ``error.type`` (the exception's class name, qualified by its
module unless a builtin). Message contents (``gen_ai.input.messages``, ``gen_ai.output.messages``, tool
arguments and results) are recorded only with the ``capture_content`` setting; the ``instrument`` setting
(``robotlab.configure(instrument=False)``, ``ROBOT_LAB_INSTRUMENT=false``) turns everything off.

Nothing here runs per streamed token: a streamed call's time to its first chunk is taken once
(:meth:`ChatSpan.first_chunk`). Per span, the work is the SDK's and little more: the fixed attributes are built
once per robot, model and tool (:mod:`robotlab._genai`), the parent is read from the context once and handed to
the tracer, and what is known only at the end is set only on a span that records.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import time
from collections.abc import Awaitable, Iterator
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from ._genai import agent_span, chat_metrics, chat_span, error_type, message, provider_name, to_json, tool_span
from .config import get_config

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, SpanKind

    from .llm.types import LLMRequest, LLMResponse

__all__ = ["SCOPE", "ChatSpan", "capture_content", "chat", "error_type", "execute_tool", "invoke_agent",
           "invoke_workflow", "provider_name", "tool_failed", "untraced"]

T = TypeVar("T")

#: The instrumentation scope of every span and metric.
SCOPE = "robotlab"

#: The run's totals recorded on its ``invoke_agent`` span: (attribute, RobotResult field).
_USAGE = (("gen_ai.usage.input_tokens", "input_tokens"), ("gen_ai.usage.output_tokens", "output_tokens"),
          ("robotlab.usage.cost", "cost"))
#: Request parameters recorded as ``gen_ai.request.*``: (parameter, attribute).
_REQUEST_PARAMS = tuple((name, f"gen_ai.request.{name}") for name in (
    "temperature", "max_tokens", "top_p", "frequency_penalty", "presence_penalty", "seed"))
#: Bucket boundaries the conventions advise for the two histograms.
_TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
_DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
#: What fails a span; another ``BaseException`` (a park) only stops it.
_FAILURES = (Exception, asyncio.CancelledError, KeyboardInterrupt)

#: The ``execute_tool`` span of the tool call in progress (:func:`tool_failed` marks it).
_tool_span: contextvars.ContextVar[Span | None] = contextvars.ContextVar("robotlab_tool_span", default=None)
_untraced: contextvars.ContextVar[bool] = contextvars.ContextVar("robotlab_untraced", default=False)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Otel:
    """The OpenTelemetry objects, made on first use (importing ``opentelemetry`` takes tens of ms)."""

    def __init__(self) -> None:
        from opentelemetry import context, metrics, trace

        from . import __version__

        self.version = __version__
        self.trace = trace
        self.metrics = metrics
        self.get_current = context.get_current
        self.attach = context.attach
        self.detach = context.detach
        self.in_context = trace.set_span_in_context
        self._no_tracers = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
        self._traced = False
        self._metered = False
        self.client = trace.SpanKind.CLIENT
        self.internal = trace.SpanKind.INTERNAL
        self.status = trace.Status
        self.error = trace.StatusCode.ERROR
        self.tracer = trace.get_tracer(SCOPE, __version__)
        meter = metrics.get_meter(SCOPE, __version__)
        self.token_usage = meter.create_histogram(
            "gen_ai.client.token.usage", unit="{token}", description="Number of input and output tokens used",
            explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS)
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration", unit="s", description="GenAI operation duration",
            explicit_bucket_boundaries_advisory=_DURATION_BUCKETS)

    def provided(self) -> bool:
        """Whether an application installed a tracer provider or a meter provider (an SDK's, a vendor's)."""
        if self._traced:  # a global provider is set once, never unset: once seen, it stays
            return True
        if not isinstance(self.trace.get_tracer_provider(), self._no_tracers):
            self._traced = True
            self.tracer = self.trace.get_tracer(SCOPE, self.version)  # the provider's own, not the proxy
            return True
        return self.metering()

    def metering(self) -> bool:
        """Whether an application installed a meter provider."""
        if not self._metered:
            provider = self.metrics.get_meter_provider()
            self._metered = not (isinstance(provider, self.metrics.NoOpMeterProvider)
                                 or type(provider).__name__ == "_ProxyMeterProvider")
        return self._metered

    def start(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> tuple[Span, contextvars.Token[Context]]:
        """Start a span under the current one and make it current; :meth:`finish` ends it.

        No generator: this is on every call. The current context is read once, for the tracer (the parent) and
        for the span's own context.
        """
        parent = self.get_current()
        span = self.tracer.start_span(name, context=parent, kind=kind, attributes=attributes)
        return span, self.attach(self.in_context(span, parent))

    def finish(self, span: Span, token: contextvars.Token[Context], error: BaseException | None = None) -> None:
        """Make the span started with ``token`` no longer current and end it, ended by ``error`` if given.

        An ``Exception``, a cancellation or an interrupt fails the span; another ``BaseException`` is a signal
        (:class:`~robotlab.tools.parking.RunParked`: the run waits for a person's answer) and only noted, in
        ``robotlab.stopped_by``.
        """
        self.detach(token)
        if error is not None:
            if isinstance(error, _FAILURES):
                self.fail(span, error)
            else:
                span.set_attribute("robotlab.stopped_by", error_type(error))
        span.end()

    def fail(self, span: Span, error: BaseException | str) -> None:
        """Mark ``span`` failed: status ERROR with the error's description, and ``error.type``."""
        kind = error if isinstance(error, str) else error_type(error)
        span.set_attribute("error.type", kind)
        description = kind if isinstance(error, str) else (str(error) or kind)
        span.set_status(self.status(self.error, description[:500]))


_otel: _Otel | None = None


def capture_content() -> bool:
    """Whether spans record message contents, tool arguments and results (the ``capture_content`` setting)."""
    return bool(get_config().capture_content)


def _active() -> _Otel | None:
    """The OpenTelemetry objects, or ``None`` when there is nothing to record.

    So it is when instrumentation is off, and when no application installed a tracer or meter provider (both
    globals are still the API's proxies or no-ops): then even the no-op spans are skipped, and ``opentelemetry``
    is not imported unless something else imported it.
    """
    global _otel
    if not get_config().instrument:
        return None
    otel = _otel
    if otel is None:
        if "opentelemetry.trace" not in sys.modules and "opentelemetry.metrics" not in sys.modules:
            return None  # no provider can have been installed
        otel = _otel = _Otel()
    return otel if otel.provided() and not _untraced.get() else None


@contextlib.contextmanager
def untraced() -> Iterator[None]:
    """Record no span and no metric for what runs in the block, and in the tasks it starts.

    For a run that is not the application's own, such as a worker's rehearsal at start
    (:func:`robotlab.robot.rehearsal.rehearse`). The OpenTelemetry objects are still built, as a traced run builds them.
    """
    token = _untraced.set(True)
    try:
        yield
    finally:
        _untraced.reset(token)


async def invoke_agent(robot_name: str, work: Awaitable[T], *, model: str | None = None,
                       conversation_id: object = None, run_id: str | None = None, description: str | None = None) -> T:
    """Await ``work`` (a robot's run) inside an ``invoke_agent {robot_name}`` span.

    The result's ``input_tokens``, ``output_tokens`` and ``cost`` (a :class:`~robotlab.RobotResult`'s) are
    recorded on the span.
    """
    otel = _active()
    if otel is None:
        return await work
    name, attributes = agent_span(robot_name, model, description)
    if conversation_id is not None or run_id:
        attributes = dict(attributes)
        if conversation_id is not None:
            attributes["gen_ai.conversation.id"] = str(conversation_id)
        if run_id:
            attributes["robotlab.run.id"] = run_id
    span, token = otel.start(name, otel.internal, attributes)
    try:
        result = await work
    except BaseException as exc:
        otel.finish(span, token, exc)
        raise
    otel.detach(token)
    if span.is_recording():
        span.set_attributes({attribute: value for attribute, field in _USAGE
                             if _number(value := getattr(result, field, None))})
    span.end()
    return result


async def invoke_workflow(network_name: str, work: Awaitable[T], *, run_id: str | None = None) -> T:
    """Await ``work`` (a network's turn) inside an ``invoke_workflow {network_name}`` span."""
    otel = _active()
    if otel is None:
        return await work
    attributes: dict[str, Any] = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": network_name}
    if run_id:
        attributes["robotlab.run.id"] = run_id
    span, token = otel.start(f"invoke_workflow {network_name}", otel.internal, attributes)
    try:
        result = await work
    except BaseException as exc:
        otel.finish(span, token, exc)
        raise
    otel.finish(span, token)
    return result


async def execute_tool(call_id: str, name: str, arguments: str, tool: object, work: Awaitable[T]) -> T:
    """Await ``work`` (``tool``'s call ``call_id``) inside an ``execute_tool {name}`` span.

    A tool's failure is returned to the model as text, not raised: :meth:`Tool.acall
    <robotlab.tools.Tool.acall>` reports it with :func:`tool_failed`, which marks this span.
    """
    otel = _active()
    if otel is None:
        return await work
    span_name, fixed = tool_span(name, tool)
    attributes = {**fixed, "gen_ai.tool.call.id": call_id}
    content = get_config().capture_content
    if content:
        attributes["gen_ai.tool.call.arguments"] = arguments
    span, token = otel.start(span_name, otel.internal, attributes)
    reset = _tool_span.set(span)
    try:
        value = await work
    except BaseException as exc:
        otel.finish(span, token, exc)
        raise
    finally:
        _tool_span.reset(reset)
    if content and span.is_recording():
        span.set_attribute("gen_ai.tool.call.result", to_json(value))
    otel.finish(span, token)
    return value


def tool_failed(error: BaseException) -> None:
    """Mark the ``execute_tool`` span of the tool call in progress failed with ``error`` (if one is traced)."""
    span = _tool_span.get()
    if span is not None and _otel is not None:
        _otel.fail(span, error)


class ChatSpan:
    """The ``chat`` span of one model call, a context manager: :meth:`first_chunk`, then :meth:`answered`."""

    __slots__ = ("_content", "_first", "_metrics", "_otel", "_started", "_token", "span")

    def __init__(self, otel: _Otel, name: str, span_attributes: dict[str, Any], metric_attributes: dict[str, Any],
                 content: bool = False) -> None:
        self._otel = otel
        self._metrics = metric_attributes
        self._content = content
        self.span, self._token = otel.start(name, otel.client, span_attributes)
        self._started = time.perf_counter()
        self._first: float | None = None

    def __enter__(self) -> ChatSpan:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if error is not None:
            self._record(error_type(error), None)
        self._otel.finish(self.span, self._token, error)

    def first_chunk(self) -> None:
        """Note that the first streamed chunk arrived (call it once, not per chunk)."""
        if self._first is None:
            self._first = time.perf_counter()

    def answered(self, response: LLMResponse) -> None:
        """Record the model's ``response`` and the call's metrics."""
        span = self.span
        if span.is_recording():
            values: dict[str, Any] = {
                "gen_ai.usage.input_tokens": response.input_tokens,
                "gen_ai.usage.output_tokens": response.output_tokens,
                "robotlab.usage.cost": response.cost,
            }
            if response.model:
                values["gen_ai.response.model"] = response.model
            if response.cached_input_tokens:
                values["gen_ai.usage.cache_read.input_tokens"] = response.cached_input_tokens
            if response.finish_reason:
                values["gen_ai.response.finish_reasons"] = (response.finish_reason,)
            if self._first is not None:
                values["gen_ai.response.time_to_first_chunk"] = self._first - self._started
            if self._content:
                values["gen_ai.output.messages"] = to_json([message(response.to_message(), response.finish_reason)])
            span.set_attributes(values)
        self._record(None, response)

    def _record(self, error: str | None, response: LLMResponse | None) -> None:
        # No check for a meter provider: without one the histograms are the API's proxies or no-ops, whose
        # record does nothing, and the attribute sets are kept ones (_genai.chat_metrics), so this costs less
        # than asking the API for its provider (which reads the environment each time while none is set).
        otel = self._otel
        duration, input_tokens, output_tokens = chat_metrics(
            self._metrics, response.model if response is not None else None, error)
        otel.duration.record(time.perf_counter() - self._started, duration)
        if response is not None:
            otel.token_usage.record(response.input_tokens, input_tokens)
            otel.token_usage.record(response.output_tokens, output_tokens)


def chat(llm: object, request: LLMRequest, *, streamed: bool) -> AbstractContextManager[ChatSpan | None]:
    """A ``chat {model}`` span around one model call (a context manager giving ``None`` when not traced)."""
    otel = _active()
    if otel is None:
        return _UNTRACED
    name, attributes, common = chat_span(request.model, llm, streamed)
    params = request.params
    content = get_config().capture_content
    if params or content:
        attributes = dict(attributes)
        for param, attribute in _REQUEST_PARAMS if params else ():
            value = params.get(param)
            if _number(value):
                attributes[attribute] = value
        if content:
            attributes["gen_ai.input.messages"] = to_json([message(m) for m in request.messages])
    return ChatSpan(otel, name, attributes, common, content)


#: What :func:`chat` gives when a call is not traced (``nullcontext`` can be entered again and again).
_UNTRACED: AbstractContextManager[None] = nullcontext()
