"""A run's spans exported over OTLP/HTTP, set up as docs/django/tracing.md shows, beside the app's own span table.

The receiver is a tiny HTTP server in the test; what it receives is decoded with the official protobuf definitions
(``opentelemetry-proto``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from robotlab.testing import text, tool_call
from robotlab_django import services
from robotlab_django.models import RunSpan, Status
from robotlab_django.tracing.processor import RunSpanProcessor

pytestmark = pytest.mark.django_db


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver: keeps each request's path, content type and body; answers as a collector does."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, str, bytes]] = []

    @property
    def endpoint(self) -> str:
        """Its base URL, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes it."""
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.requests.append((self.path, self.headers["Content-Type"], body))
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass


class _Switch(SpanProcessor):
    """Hands spans to ``inner`` while a test sets it (a provider keeps its processors for ever)."""

    def __init__(self) -> None:
        self.inner: SpanProcessor | None = None

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if self.inner is not None:
            self.inner.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        if self.inner is not None:
            self.inner.on_end(span)


_switch: _Switch | None = None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver serving in a thread of its own."""
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def project_exporter(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[BatchSpanProcessor]:
    """The project's own export, as the docs set it up: a batch processor over the OTLP/HTTP exporter, whose
    endpoint comes from ``OTEL_EXPORTER_OTLP_ENDPOINT``, on the process's SDK tracer provider."""
    global _switch
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider)
    if _switch is None:
        _switch = _Switch()
        provider.add_span_processor(_switch)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
    batch = BatchSpanProcessor(OTLPSpanExporter())
    _switch.inner = batch
    try:
        yield batch
    finally:
        _switch.inner = None
        batch.shutdown()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


def test_a_runs_spans_go_over_otlp_and_into_the_span_table(kept: RunSpanProcessor,
                                                            project_exporter: BatchSpanProcessor,
                                                            receiver: Receiver, scripted_llm: Any) -> None:
    scripted_llm(tool_call("add", id="call_1", a=2, b=3, usage=(12, 4)), text("5", usage=(30, 2)))
    row = services.run_robot("s-otlp", "calculator", "2 + 3?")
    assert row.status == Status.COMPLETED
    assert project_exporter.force_flush()
    kept.force_flush()

    assert receiver.requests, "nothing was exported"
    assert {(path, kind) for path, kind, _body in receiver.requests} == {("/v1/traces", "application/x-protobuf")}
    received: dict[str, tuple[str, ProtoSpan]] = {}
    for _path, _kind, body in receiver.requests:
        request = ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    received[span.span_id.hex()] = (scope.scope.name, span)
    stored = {span.span_id: span for span in RunSpan.objects.filter(result=row)}
    assert set(received) == set(stored)  # the same spans, exported and kept
    assert sorted(span.name for _scope, span in received.values()) == ["chat", "chat", "execute_tool add",
                                                                        "invoke_agent calculator"]
    for span_id, (scope, span) in received.items():
        mine = stored[span_id]
        assert scope == "robotlab"
        assert (span.trace_id.hex(), span.parent_span_id.hex()) == (mine.trace_id, mine.parent_span_id)
        attributes = {item.key: _value(item.value) for item in span.attributes}
        assert attributes["gen_ai.operation.name"] == mine.attributes["gen_ai.operation.name"]
        assert span.end_time_unix_nano > span.start_time_unix_nano
    agent = next(span for _scope, span in received.values() if span.name == "invoke_agent calculator")
    assert agent.kind == ProtoSpan.SPAN_KIND_INTERNAL
    assert {item.key: _value(item.value) for item in agent.attributes}["gen_ai.usage.input_tokens"] == 42
    tool = next(span for _scope, span in received.values() if span.name == "execute_tool add")
    assert {item.key: _value(item.value) for item in tool.attributes}["gen_ai.tool.call.id"] == "call_1"
