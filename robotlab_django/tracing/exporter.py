"""Spans into the span table (``ROBOTLAB["SPAN_MODEL"]``): one row per span, written in bulk.

:class:`RunSpanExporter` is the OpenTelemetry SDK exporter behind the app's batch span processor
(:mod:`robotlab_django.tracing.processor`): the SDK's batching thread hands it the ended spans, it writes them with
one ``bulk_create`` per batch. A span already stored (an open job span, :func:`store_open`) is updated in place
(an upsert on its trace and span ids). A span whose run row is gone (erased meanwhile) is dropped, and a database
error that lasts (a busy or dropped database is tried again, 4 times) loses the batch with a warning: storing spans
never fails a run. It needs ``opentelemetry-sdk``.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Mapping, MutableMapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connections, router
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from robotlab_django import swappable
from robotlab_django.tracing.marks import RunMark

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Link, SpanContext

__all__ = ["RunSpanExporter", "SpanKey", "span_fields", "span_key", "store", "store_open"]

logger = logging.getLogger("robotlab_django")

#: Tries of a write the database refused for a moment, and the first wait in seconds (grown linearly): the
#: batch is written by the SDK's own thread, so waiting costs a run nothing.
ATTEMPTS, BACKOFF = 4, 0.05

#: A span's identity: (trace id, span id), as the SDK's integers.
SpanKey = tuple[int, int]

#: The columns an upsert rewrites (an open job span stored at its start, then ended).
_UPDATED = ("ended_at", "status", "status_message", "attributes", "links", "input_tokens", "output_tokens", "cost")


def span_key(context: SpanContext) -> SpanKey:
    """The key of the span with ``context`` in the processor's marks."""
    return context.trace_id, context.span_id


def _hex_trace(value: int) -> str:
    return format(value, "032x")


def _hex_span(value: int) -> str:
    return format(value, "016x")


def _time(nanoseconds: int | None) -> dt.datetime | None:
    """An aware UTC datetime, to the microsecond, from the SDK's nanoseconds since the epoch."""
    if nanoseconds is None:
        return None
    seconds, rest = divmod(nanoseconds, 1_000_000_000)
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).replace(microsecond=rest // 1000)


def _value(value: object) -> Any:
    """An attribute value as JSON: sequences as lists, non-finite floats as text."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_value(item) for item in value]
    return value


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _cost(value: object) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return Decimal(0)
    try:
        cost = Decimal(str(value)).quantize(Decimal("0.00000001"))
    except InvalidOperation:
        return Decimal(0)
    return cost if cost.is_finite() and 0 <= cost < Decimal(1_000_000) else Decimal(0)


def _link(link: Link) -> dict[str, str]:
    """A span link as stored: its trace and span ids, and why it links (``robotlab.link``) when it says."""
    stored = {"trace_id": _hex_trace(link.context.trace_id), "span_id": _hex_span(link.context.span_id)}
    relation = (link.attributes or {}).get("robotlab.link")
    if isinstance(relation, str) and relation:
        stored["relation"] = relation[:100]
    return stored


def span_fields(span: ReadableSpan, mark: RunMark) -> dict[str, Any]:
    """The span model's columns for ``span`` of the run ``mark`` (a span not ended yet has no ``ended_at``)."""
    context = span.context
    assert context is not None
    attributes: Mapping[str, Any] = span.attributes or {}
    status = span.status.status_code.name.lower()
    return {
        "result_id": mark.result_id, "trace_id": _hex_trace(context.trace_id), "span_id": _hex_span(context.span_id),
        "parent_span_id": _hex_span(span.parent.span_id) if span.parent is not None else "",
        "name": span.name[:255], "kind": span.kind.name.lower(), "started_at": _time(span.start_time),
        "ended_at": _time(span.end_time), "status": status if status in ("ok", "error") else "unset",
        "status_message": span.status.description or "",
        "attributes": {key: _value(value) for key, value in attributes.items()},
        "links": [_link(link) for link in span.links],
        "input_tokens": _count(attributes.get("gen_ai.usage.input_tokens")),
        "output_tokens": _count(attributes.get("gen_ai.usage.output_tokens")),
        "cost": _cost(attributes.get("robotlab.usage.cost")),
        "worker": mark.worker[:255], "worker_pid": mark.worker_pid,
    }


def store(rows: list[dict[str, Any]]) -> int:
    """Write the span rows ``rows`` (from :func:`span_fields`) in bulk; rows of runs no longer stored are dropped.

    Returns:
        How many rows were written (``0`` when the database refused them: logged, never raised).
    """
    if not rows:
        return 0
    model = swappable.span_model()
    using = router.db_for_write(model)
    opened = connections[using].connection is None  # a connection this call opens is closed again
    try:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                runs = set(swappable.result_model().objects.using(using)
                           .filter(pk__in={row["result_id"] for row in rows}).values_list("pk", flat=True))
                kept = [model(**row) for row in rows if row["result_id"] in runs]
                model.objects.using(using).bulk_create(kept, update_conflicts=True,
                                                       unique_fields=("trace_id", "span_id"), update_fields=_UPDATED)
                return len(kept)
            except IntegrityError:  # a run was erased between the check and the write: check again, once
                if attempt >= 2:
                    raise
            except (OperationalError, InterfaceError) as exc:  # busy (a locked SQLite file) or a dropped connection
                if attempt == ATTEMPTS or connections[using].in_atomic_block:
                    raise
                logger.info("robotlab: storing %s span(s) failed (%s); retrying", len(rows), exc)
                connections[using].close()
                time.sleep(BACKOFF * attempt)
        return 0  # pragma: no cover - the loop returns or raises
    except DatabaseError as exc:
        logger.warning("robotlab: %s span(s) of runs could not be stored: %s", len(rows), exc)
        return 0
    finally:
        if opened and not connections[using].in_atomic_block:
            connections[using].close()


def store_open(span: ReadableSpan, mark: RunMark) -> None:
    """Store ``span`` now, before it ends: a job's span, which stays without an end when its worker is lost."""
    store([span_fields(span, mark)])


class RunSpanExporter(SpanExporter):
    """Writes the ended spans of runs to the span table; ``marks`` (shared with the processor) says whose they are.

    Args:
        marks: The run of each span the processor kept, by :func:`span_key`; each is removed as its span is written.
    """

    def __init__(self, marks: MutableMapping[SpanKey, RunMark]) -> None:
        self.marks = marks

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Store ``spans`` (those the processor marked) in one bulk write."""
        rows = []
        for span in spans:
            if span.context is None:
                continue
            mark = self.marks.pop(span_key(span.context), None)
            if mark is not None:
                rows.append(span_fields(span, mark))
        store(rows)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release: each export opens and closes its own connection."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Nothing is buffered here (the processor batches)."""
        return True
