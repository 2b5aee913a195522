"""The ``gen_ai.evaluation.result`` events of an eval's cases, on each case's trace when tracing is on.

Each case of an eval run is replayed and scored inside a span of its own (:func:`case_span`,
``evaluate <robot>``), current while its run is queued or executed, so the run's spans (``invoke_agent``, ``chat``,
``execute_tool``; a Celery job's span, through the message's trace context) are its children: one trace per case.
Once the case is scored the span gets one ``gen_ai.evaluation.result`` event per evaluator, with the OpenTelemetry
GenAI attributes ``gen_ai.evaluation.name`` (the evaluator's kind), ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` (``pass`` or ``fail``, at the eval's pass score) and
``gen_ai.evaluation.explanation`` (the reason), and the case's score in ``robotlab.eval.score``. With
``ROBOTLAB["TRACES"]`` on the span is kept with the case's run row.

Tracing is on when the core's instrumentation is (``robotlab.configure(instrument=...)``, ``ROBOTLAB["INSTRUMENT"]``)
and a tracer provider records spans; otherwise nothing is made. Nothing here fails an eval: a tracing error is
logged.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from robotlab.config import get_config
from robotlab_django.evals.verdicts import Score
from robotlab_django.tracing.runs import keeping, mark_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from robotlab_django.models import EvalCase, EvalRun, RobotResult

__all__ = ["EVENT_NAME", "SCOPE", "CaseTrace", "case_span"]

logger = logging.getLogger("robotlab_django")

#: The event each evaluator's verdict becomes (OpenTelemetry GenAI semantic conventions).
EVENT_NAME = "gen_ai.evaluation.result"
#: The instrumentation scope of the case spans.
SCOPE = "robotlab_django.evals"
#: Reasons longer than this are cut in the event.
EXPLANATION_LENGTH = 1000


class CaseTrace:
    """The span of one case (``None`` when nothing is traced): :meth:`record` puts the verdicts on it."""

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def record(self, row: RobotResult, scores: Sequence[Score], score: float, pass_score: float) -> None:
        """One ``gen_ai.evaluation.result`` event per verdict, the case's score, and the span kept with ``row``.

        A verdict (and the case) is labelled ``pass`` at ``pass_score`` or more.
        """
        span = self.span
        if span is None:
            return
        try:
            for verdict in scores:
                span.add_event(EVENT_NAME, {
                    "gen_ai.evaluation.name": verdict.kind,
                    "gen_ai.evaluation.score.value": float(verdict.score),
                    "gen_ai.evaluation.score.label": "pass" if verdict.score >= pass_score else "fail",
                    "gen_ai.evaluation.explanation": verdict.reason[:EXPLANATION_LENGTH],
                })
            span.set_attribute("robotlab.eval.score", float(score))
            span.set_attribute("robotlab.eval.passed", score >= pass_score)
            if row is not None:
                span.set_attribute("robotlab.run.id", str(row.run_id))
                _keep_with(span, row)
        except Exception:  # the verdicts are stored on the eval run either way
            logger.exception("robotlab: the evaluation events of a case could not be recorded")


def _keep_with(span: Span, row: RobotResult) -> None:
    """Keep ``span`` in the span table as one of ``row``'s (it started before the row existed)."""
    kept = keeping()
    context = span.get_span_context()
    if kept is not None and context.is_valid:
        from robotlab_django.tracing.exporter import span_key

        kept.marks[span_key(context)] = mark_of(row)


def _tracer() -> Any:
    """The tracer of the case spans, or ``None`` when nothing would record them."""
    if not get_config().instrument:
        return None
    keeping()  # ROBOTLAB["TRACES"]: the app's provider and processor, installed at first use
    if "opentelemetry.trace" not in sys.modules:
        return None
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return trace.get_tracer(SCOPE)


@contextmanager
def case_span(eval_run: EvalRun, case: EvalCase) -> Iterator[CaseTrace]:
    """Make the span of ``case`` of ``eval_run`` current for the block (see the module); a no-op untraced."""
    try:
        tracer = _tracer()
    except Exception:
        logger.exception("robotlab: the tracer of eval cases is unavailable")
        tracer = None
    if tracer is None:
        yield CaseTrace(None)
        return
    from opentelemetry import context, trace

    span = tracer.start_span(f"evaluate {eval_run.robot_name}", attributes={
        "gen_ai.agent.name": str(eval_run.robot_name), "robotlab.eval.run": int(eval_run.pk),
        "robotlab.eval.set": str(eval_run.eval_set), "robotlab.eval.case": str(case),
        "robotlab.eval.case_id": int(case.pk), "robotlab.eval.offline": bool(eval_run.offline),
    })
    token = context.attach(trace.set_span_in_context(span))
    try:
        yield CaseTrace(span)
    except BaseException as exc:
        span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc) or type(exc).__name__))
        span.set_attribute("error.type", type(exc).__name__)
        raise
    finally:
        context.detach(token)
        span.end()
