"""Each eval case's trace: its run's spans under the case's span, which carries one evaluation event per verdict."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab.config import get_config
from robotlab_django.evals.cases import load_yaml
from robotlab_django.evals.eval_runs import run_eval
from robotlab_django.evals.trace_events import EVENT_NAME
from robotlab_django.models import RunSpan
from robotlab_django.tracing.processor import RunSpanProcessor
from tests.robotlab.spans import Recorder, parent_of, span_id
from tests.robotlab_django.tracing.conftest import kept, spans  # noqa: F401  (the tracing tests' fixtures)

pytestmark = pytest.mark.django_db

YAML = """
set: traced
cases:
  - name: greet
    input: Hello
    expectations: [{kind: contains, value: Hi}, {kind: regex, pattern: "^Bye"}]
    recorded: [{content: "Hi there!"}]
  - name: sum
    input: 2+3?
    expectations: [{kind: regex, pattern: "5"}]
    recorded: [{content: "It is 5."}]
"""


def _events(span: Any) -> list[dict[str, Any]]:
    return [dict(event.attributes or {}) for event in span.events if event.name == EVENT_NAME]


def test_each_case_span_has_an_evaluation_event_per_verdict_over_its_runs_spans(spans: Recorder) -> None:  # noqa: F811
    get_config().instrument = True
    eval_set, _count = load_yaml(YAML)
    eval_run = run_eval("echo", eval_set, None, offline=True)
    cases = {span.attributes["robotlab.eval.case"]: span for span in spans.all_spans()
             if span.name == "evaluate echo" and span.attributes}
    assert sorted(cases) == ["greet", "sum"]
    assert _events(cases["greet"]) == [
        {"gen_ai.evaluation.name": "contains", "gen_ai.evaluation.score.value": 1.0,
         "gen_ai.evaluation.score.label": "pass", "gen_ai.evaluation.explanation": "contains ['Hi']"},
        {"gen_ai.evaluation.name": "regex", "gen_ai.evaluation.score.value": 0.0,
         "gen_ai.evaluation.score.label": "fail", "gen_ai.evaluation.explanation": "no match for '^Bye'"}]
    assert [event["gen_ai.evaluation.name"] for event in _events(cases["sum"])] == ["regex"]
    greet = cases["greet"]
    assert greet.attributes is not None and greet.attributes["robotlab.eval.score"] == 0.5
    assert greet.attributes["robotlab.eval.run"] == eval_run.pk and greet.attributes["robotlab.eval.passed"] is True
    result = eval_run.results.get(case__name="greet").result
    assert greet.attributes["robotlab.run.id"] == result.run_id
    agents = spans.named("invoke_agent echo")
    assert len(agents) == 2 and {parent_of(agent) for agent in agents} == {span_id(cases["greet"]),
                                                                          span_id(cases["sum"])}
    assert {agent.context.trace_id for agent in agents if agent.context} == {
        span.context.trace_id for span in cases.values() if span.context}


def test_with_traces_kept_the_case_span_is_stored_with_its_run(kept: RunSpanProcessor,  # noqa: F811
                                                               spans: Recorder, settings: Any) -> None:  # noqa: F811
    get_config().instrument = True
    eval_set, _count = load_yaml(YAML)
    eval_run = run_eval("echo", eval_set, None, offline=True)
    kept.force_flush()
    row = eval_run.results.get(case__name="sum").result
    stored = {span.name: span for span in RunSpan.objects.filter(result=row)}
    assert sorted(stored) == ["chat", "evaluate echo", "invoke_agent echo"]
    case, agent = stored["evaluate echo"], stored["invoke_agent echo"]
    assert agent.parent_span_id == case.span_id and case.parent_span_id == ""
    assert case.attributes["robotlab.eval.score"] == 1.0 and case.attributes["robotlab.eval.case"] == "sum"


def test_without_instrumentation_no_case_span_is_made(spans: Recorder) -> None:  # noqa: F811
    get_config().instrument = False
    eval_set, _count = load_yaml(YAML)
    eval_run = run_eval("echo", eval_set, None, offline=True)
    assert eval_run.cases == 2 and not [span for span in spans.all_spans() if span.name == "evaluate echo"]
