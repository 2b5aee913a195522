"""An OpenTelemetry SDK for the tests of the core's spans and metrics.

The global providers can be set once per process, so :func:`recording` installs an SDK tracer provider (its
spans go to an ``InMemorySpanExporter``, only while a test records) and an SDK meter provider (read by an
``InMemoryMetricReader``) the first time, and every later test reuses them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from robotlab.telemetry import SCOPE

_lock = threading.Lock()
_installed = False
_exporter = InMemorySpanExporter()
_reader = InMemoryMetricReader()


class _WhileRecording(SpanProcessor):
    """Hands finished spans to the in-memory exporter only while a test records."""

    def __init__(self) -> None:
        self.on = False
        self.inner = SimpleSpanProcessor(_exporter)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.inner.on_end(span)


_switch = _WhileRecording()


def _install() -> None:
    global _installed
    with _lock:
        if not _installed:
            provider = TracerProvider()
            provider.add_span_processor(_switch)
            trace.set_tracer_provider(provider)
            metrics.set_meter_provider(MeterProvider(metric_readers=[_reader]))
            _installed = True


class Recorder:
    """The spans and metrics recorded during one test."""

    def spans(self) -> list[ReadableSpan]:
        """RobotLab's finished spans, in the order they ended."""
        return [s for s in _exporter.get_finished_spans() if s.instrumentation_scope and
                s.instrumentation_scope.name == SCOPE]

    def all_spans(self) -> list[ReadableSpan]:
        """Every finished span, whatever its instrumentation scope (the Django app's ``robotlab_django`` too)."""
        return list(_exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        """RobotLab's spans whose name starts with ``prefix``."""
        return [s for s in self.spans() if s.name.startswith(prefix)]

    def one(self, name: str) -> ReadableSpan:
        """The one span called ``name``."""
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"{len(found)} spans called {name!r}: {[s.name for s in self.spans()]}"
        return found[0]

    def metric_points(self, name: str) -> list[Any]:
        """The data points of the metric ``name`` from RobotLab's scope (cumulative since the process began)."""
        data = _reader.get_metrics_data()
        points: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                if scope.scope.name != SCOPE:
                    continue
                for metric in scope.metrics:
                    if metric.name == name:
                        points.extend(metric.data.data_points)
        return points


def parent_of(span: ReadableSpan) -> int | None:
    """The span id of ``span``'s parent (``None`` for a root)."""
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    """``span``'s own id."""
    assert span.context is not None
    return span.context.span_id


@contextmanager
def recording() -> Iterator[Recorder]:
    """Record RobotLab's spans for the block (the SDK installed on first use)."""
    _install()
    _exporter.clear()
    _switch.on = True
    try:
        yield Recorder()
    finally:
        _switch.on = False
        _exporter.clear()
