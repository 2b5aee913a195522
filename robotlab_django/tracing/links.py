"""Runs in the traces of what started them: a re-run linked to the run it repeats, a socket's runs in its trace.

* :func:`rerun` wraps the dispatch of a re-run (the admin's "Re-run last user message":
  :func:`robotlab_django.runs.executor.rerun_last_user_message`) in a span ``rerun {robot}``, kept on the new row,
  with a span link to the first span kept of the run it repeats (``robotlab.link`` = ``re-run of``), as the GenAI
  execution guidance has it for a run started again. The new run's spans are its children: in this process
  (``sync``), in the background thread (``thread``) or on a worker (``celery``, through the job's headers).
* :func:`from_request` runs a block in the trace of a request's headers (``traceparent``, ``tracestate``): the chat
  socket queues its runs in it, so the websocket request that queued a run is the parent of the run's spans when it
  has a trace (and no span of the project's own ASGI instrumentation is current already).

Both do nothing when the core's instrumentation is off; :func:`rerun` also when the spans of runs are not kept
(the ids of the earlier run's spans are known only from the span table).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from robotlab.config import get_config
from robotlab_django import swappable
from robotlab_django.tracing.marks import marked
from robotlab_django.tracing.runs import keeping, mark_of

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["RERUN_OF", "from_request", "rerun"]

logger = logging.getLogger("robotlab_django")

#: The ``robotlab.link`` attribute of a re-run's link to the run it repeats.
RERUN_OF = "re-run of"
#: The instrumentation scope of the app's own spans (as :data:`robotlab_django.tracing.propagation.JOB_SCOPE`).
SCOPE = "robotlab_django"


def _start(earlier: RobotResult, row: RobotResult) -> Any:
    """The started ``rerun`` span of ``row``, linked to ``earlier``'s first span; ``None`` when nothing is kept."""
    if not get_config().instrument or keeping() is None:
        return None
    from opentelemetry import trace
    from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags

    first = (swappable.span_model().objects.filter(result_id=earlier.pk).order_by("started_at", "id")
             .only("trace_id", "span_id").first())
    links = [] if first is None else [Link(SpanContext(int(first.trace_id, 16), int(first.span_id, 16), is_remote=True,
                                                       trace_flags=TraceFlags(TraceFlags.SAMPLED)),
                                           {"robotlab.link": RERUN_OF})]
    attributes = {"robotlab.run.id": str(row.run_id), "robotlab.rerun.of": str(getattr(earlier, "run_id", "") or "")}
    with marked(mark_of(row)):  # kept on the new row (the processor reads the mark as the span starts)
        return trace.get_tracer(SCOPE).start_span(f"rerun {row.robot_name}", kind=SpanKind.INTERNAL,
                                                  attributes=attributes, links=links)


@contextmanager
def rerun(earlier: RobotResult, row: RobotResult) -> Iterator[None]:
    """Run the block (the dispatch of ``row``, a re-run of ``earlier``) in ``row``'s ``rerun`` span.

    Tracing never fails the re-run: an error starting the span is logged, and the block runs without it.
    """
    try:
        span = _start(earlier, row)
    except Exception:
        logger.exception("robotlab: the span of the re-run %s could not be started", getattr(row, "pk", row))
        span = None
    if span is None:
        yield
        return
    from opentelemetry import trace

    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        yield


def _text(value: object) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


@contextmanager
def from_request(headers: Iterable[tuple[Any, Any]]) -> Iterator[None]:
    """Run the block in the trace of ``headers`` (an ASGI scope's ``[(name, value)]``), when they carry one.

    Nothing changes when the core's instrumentation is off, when the headers carry no ``traceparent``, or when a
    span is current already (the project's own instrumentation traces the request).
    """
    carrier = {_text(name).lower(): _text(value) for name, value in headers}
    if "traceparent" not in carrier or not get_config().instrument:
        yield
        return
    from opentelemetry import context, propagate, trace

    token = None
    if not trace.get_current_span().get_span_context().is_valid:
        try:
            token = context.attach(propagate.extract(carrier))
        except Exception:  # a project's propagator failed: the run is queued outside the request's trace
            logger.exception("robotlab: the trace context of a request could not be read")
    try:
        yield
    finally:
        if token is not None:
            context.detach(token)
