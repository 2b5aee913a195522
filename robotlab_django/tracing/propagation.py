"""The W3C trace context through Celery jobs: a job continues the trace of whoever queued it.

The executor sends a job with the trace context current as it queued it (:func:`later`: the message goes after the
commit) in its message's headers (:func:`headers`: ``traceparent`` and ``tracestate``, through OpenTelemetry's
configured propagator). The job (:func:`job`, around :func:`robotlab_django.tasks.run_robot`) runs inside a
``job {robot}`` span (kind ``CONSUMER``), a child of that context, so a distributed network turn is one trace: each
task's job is a child of the job that queued it, on whichever worker. With ``ROBOTLAB["TRACES"]`` on the job's
span is stored as it starts (without an end); a later job of the same row (a retry after its worker died, a
redelivery, a run resumed after a park) has a span link to the row's last job span, ended or not.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import TYPE_CHECKING, Any, ParamSpec

from robotlab.config import get_config
from robotlab.telemetry import error_type
from robotlab_django import swappable
from robotlab_django.runs.records import current_worker
from robotlab_django.tracing.marks import RunMark, marked
from robotlab_django.tracing.runs import keeping

if TYPE_CHECKING:
    from celery.app.task import Context
    from opentelemetry.trace import Span

__all__ = ["JOB_SCOPE", "headers", "job", "later", "request_headers", "running", "start_inline", "traces_jobs"]

P = ParamSpec("P")

logger = logging.getLogger("robotlab_django")

#: The instrumentation scope of the app's own spans.
JOB_SCOPE = "robotlab_django"


def headers() -> dict[str, str]:
    """The current trace context as message headers (``{}`` outside a trace, or with instrumentation off)."""
    if "opentelemetry.trace" not in sys.modules or not get_config().instrument:
        return {}  # nothing can have started a span
    from opentelemetry import propagate, trace

    if not trace.get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    try:
        propagate.inject(carrier)
    except Exception:  # a project's propagator failed: the job is sent without the context
        logger.exception("robotlab: the trace context could not be put in a job's headers")
        return {}
    return carrier


def later(function: Callable[P, None], *args: P.args, **kwargs: P.kwargs) -> Callable[[], None]:
    """``function(*args, **kwargs)`` to be called later (after a commit) in the trace context current now."""
    if "opentelemetry.context" not in sys.modules:
        return lambda: function(*args, **kwargs)
    from opentelemetry import context

    captured = context.get_current()

    def call() -> None:
        token = context.attach(captured)
        try:
            function(*args, **kwargs)
        finally:
            context.detach(token)

    return call


def request_headers(request: Context) -> dict[str, str]:
    """A Celery task request's message headers as text: its ``headers`` (in eager mode), else its attributes."""
    found: dict[str, str] = {}
    given = getattr(request, "headers", None)
    if isinstance(given, Mapping):
        found.update({key: value for key, value in given.items() if isinstance(value, str)})
    for name in ("traceparent", "tracestate", "baggage"):
        value = getattr(request, name, None)
        if name not in found and isinstance(value, str):
            found[name] = value
    return found


def _earlier_job(result_id: int, name: str) -> Any:
    """The span of the row's last job stored so far (``None`` without one)."""
    return (swappable.span_model().objects.filter(result_id=result_id, kind="consumer", name=name)
            .order_by("-started_at", "-id").only("trace_id", "span_id").first())


def traces_jobs() -> bool:
    """Whether jobs get spans: the core's instrumentation is on and a tracer provider is installed (or kept)."""
    if not get_config().instrument:
        return False
    if keeping() is not None:
        return True
    if "opentelemetry.trace" not in sys.modules:
        return False
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # else the spans are no-ops


def _start(request: Context | None, result_id: int, *, inline: bool = False) -> Span | None:
    """Start the job's span (stored at once when spans are kept); ``None`` when there is nothing to trace.

    ``inline``: the row's task runs in the job in progress (:mod:`robotlab_django.networks.inline`), whose span is
    its parent; ``request`` is then ``None``.
    """
    if not traces_jobs():
        return None
    kept = keeping()
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

    row = (swappable.result_model().objects.filter(pk=result_id)
           .values("robot_name", "task_name", "run_id").first())
    name = f"job {(row['task_name'] or row['robot_name']) if row else result_id}"
    worker, pid = current_worker()
    mark = RunMark(result_id, worker, pid)
    links = []
    earlier = _earlier_job(result_id, name) if kept is not None and row else None
    if earlier is not None:
        links.append(Link(SpanContext(int(earlier.trace_id, 16), int(earlier.span_id, 16), is_remote=True,
                                      trace_flags=TraceFlags(TraceFlags.SAMPLED)),
                          {"robotlab.link": "earlier attempt"}))
    delivery = getattr(request, "delivery_info", None) or {}
    attributes: dict[str, Any] = {
        "messaging.system": "celery", "messaging.operation.type": "process", "messaging.operation.name": "run_robot",
        "messaging.message.id": str(getattr(request, "id", "") or ""),
        "messaging.destination.name": str(delivery.get("routing_key") or ""),
        "robotlab.job.retries": int(getattr(request, "retries", 0) or 0),
        "robotlab.job.redelivered": bool(delivery.get("redelivered")),
    }
    if inline:
        attributes = {"robotlab.job.inline": True}
    if row:
        attributes["robotlab.run.id"] = row["run_id"]
    context = None if inline or request is None else propagate.extract(request_headers(request))
    # the processor keeps the span (its on_start reads the mark) only while the spans of runs are kept (TRACES)
    with marked(mark) if kept is not None else nullcontext(mark):
        span = trace.get_tracer(JOB_SCOPE).start_span(name, context=context, kind=SpanKind.CONSUMER,
                                                      attributes=attributes, links=links)
    if kept is not None and row:
        from opentelemetry.sdk.trace import ReadableSpan

        from robotlab_django.tracing.exporter import store_open

        if isinstance(span, ReadableSpan):  # the SDK's (a sampler may drop it)
            store_open(span, mark)
    return span


@contextmanager
def job(request: Context, result_id: int) -> Iterator[None]:
    """Run the block (a job of the row ``result_id``) in its ``job`` span, continuing its message's trace.

    Nothing is done when the core's instrumentation is off, or when no tracer provider is installed (and the
    spans of runs are not kept: ``ROBOTLAB["TRACES"]`` installs one). Tracing never fails the job: an error
    starting its span is logged, and the job runs without it.
    """
    try:
        span = _start(request, result_id)
    except Exception:
        logger.exception("robotlab: the span of the job of run %s could not be started", result_id)
        span = None
    with running(span):
        yield


def start_inline(result_id: int) -> Span | None:
    """The ``job`` span of the task row ``result_id`` that the job in progress runs itself, started (sync code).

    A child of that job's span, as the job of a sent task is a child of the job that sent it (stored at once when
    spans are kept). ``None`` when there is nothing to trace; an error starting it is logged.
    """
    try:
        return _start(None, result_id, inline=True)
    except Exception:
        logger.exception("robotlab: the span of the job of run %s could not be started", result_id)
        return None


@contextmanager
def running(span: Span | None) -> Iterator[None]:
    """Run the block in the job span ``span`` (ended after it, with the block's error), or as it is for ``None``."""
    if span is None:
        yield
        return
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    try:
        with trace.use_span(span, record_exception=False, set_status_on_exception=False):
            yield
    except BaseException as exc:
        span.set_attribute("error.type", error_type(exc))
        span.set_status(Status(StatusCode.ERROR, (str(exc) or error_type(exc))[:500]))
        raise
    finally:
        span.end()
