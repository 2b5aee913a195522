"""The span processor that keeps the spans of the app's runs, and its installation on the global tracer provider.

:class:`RunSpanProcessor` is the SDK's :class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor` over
:class:`~robotlab_django.tracing.exporter.RunSpanExporter`: a span started while a run is marked
(:mod:`robotlab_django.tracing.marks`) is queued as it ends, and the SDK's own thread writes the queue in bulk,
every ``OTEL_BSP_SCHEDULE_DELAY`` ms (5 s by default) or each 512 spans, so a run never waits on the database for
its spans. Other spans pass by untouched.

:func:`install` puts it on the global tracer provider once per process, at the first run the process executes
(after the project's start-up, where a project sets its own provider):

* the provider is the SDK's (the project set one up, with its OTLP exporter or any other): the processor is added
  beside the project's, which go on exporting as before;
* no provider is set (the API's proxy): the app sets an SDK ``TracerProvider`` of its own, with this processor
  only (configured by the ``OTEL_*`` variables: resource, sampler);
* another implementation (a vendor's own provider): nothing is kept, and a warning says so once.

It needs ``opentelemetry-sdk``.
"""

from __future__ import annotations

import logging
import threading
from typing import TypedDict, Unpack

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from robotlab_django.tracing import marks
from robotlab_django.tracing.exporter import RunSpanExporter, SpanKey, span_key

__all__ = ["MAX_PENDING", "BatchOptions", "RunSpanProcessor", "install", "installed"]

logger = logging.getLogger("robotlab_django")

#: Spans kept but not yet written beyond which new ones are not kept (a database that stopped taking them).
MAX_PENDING = 100_000

_lock = threading.Lock()
_installed: tuple[TracerProvider, RunSpanProcessor] | None = None
_warned = False


class BatchOptions(TypedDict, total=False):
    """The batching options of :class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor` (``None``: its default)."""

    max_queue_size: int | None
    schedule_delay_millis: float | None
    max_export_batch_size: int | None
    export_timeout_millis: float | None


class RunSpanProcessor(BatchSpanProcessor):
    """Queues the spans of the app's runs as they end, for :class:`RunSpanExporter` to write in bulk.

    Args:
        **options: The batching options of :class:`~opentelemetry.sdk.trace.export.BatchSpanProcessor`
            (``schedule_delay_millis``, ``max_export_batch_size``, ...; the ``OTEL_BSP_*`` variables by default).
    """

    def __init__(self, **options: Unpack[BatchOptions]) -> None:
        #: The run of each span kept and not yet written.
        self.marks: dict[SpanKey, marks.RunMark] = {}
        super().__init__(RunSpanExporter(self.marks), **options)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Keep ``span`` when it starts inside a run of the app."""
        mark = marks.current()
        if mark is not None and span.context is not None and len(self.marks) < MAX_PENDING:
            self.marks[span_key(span.context)] = mark

    def on_end(self, span: ReadableSpan) -> None:
        """Queue ``span`` for the database when it was kept (and sampled)."""
        context = span.context
        if context is None or span_key(context) not in self.marks:
            return
        if not context.trace_flags.sampled:
            self.marks.pop(span_key(context), None)
            return
        super().on_end(span)


def installed() -> RunSpanProcessor | None:
    """The processor :func:`install` put on the global provider, while that provider is still the global one."""
    found = _installed
    if found is not None and found[0] is trace.get_tracer_provider():
        return found[1]
    return None


def install(**options: Unpack[BatchOptions]) -> RunSpanProcessor | None:
    """The processor on the global tracer provider, added (or the SDK provider set) on the first call.

    Args:
        **options: The batching options of the processor, when this call creates it (:class:`RunSpanProcessor`).

    Returns:
        The processor, or ``None`` when the global provider is not the SDK's (nothing can be kept).
    """
    global _installed, _warned
    found = installed()
    if found is not None:
        return found
    with _lock:
        found = installed()
        if found is not None:
            return found
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):  # no provider: the app's own
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()  # the one set, whoever won
        if not isinstance(provider, TracerProvider):
            if not _warned:
                logger.warning("robotlab: the tracer provider is %s, not the OpenTelemetry SDK's: the spans of runs "
                               "are not kept (ROBOTLAB['TRACES'])", type(provider).__name__)
                _warned = True
            return None
        processor = RunSpanProcessor(**options)
        provider.add_span_processor(processor)
        _installed = (provider, processor)
        return processor
