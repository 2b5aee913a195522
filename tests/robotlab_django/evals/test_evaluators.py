"""Every evaluator kind scores a passing and a failing reply, with a reason; a judge's cost is recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from robotlab.testing import FakeLLM, text
from robotlab_django.evals.evaluators import Reply, Score, UnknownEvaluatorError, evaluate, evaluator
from robotlab_django.evals.judge import judge_prompt, parse_verdict


@evaluator
def polite(reply: Reply) -> tuple[float, str]:
    """Polite replies say please."""
    return (1.0, "said please") if "please" in reply.text else (0.0, "no please")


def not_marked(reply: Reply) -> float:
    """Not an evaluator."""
    return 1.0


CALLS = [{"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "log", "arguments": {}}]

CASES: list[tuple[dict[str, Any], Reply, Reply]] = [
    ({"kind": "exact"}, Reply("It is 5.", reference="It is 5."), Reply("It is 6.", reference="It is 5.")),
    ({"kind": "exact", "value": "yes", "ignore_case": True}, Reply(" YES "), Reply("no")),
    ({"kind": "contains", "value": ["30 days", "refund"]}, Reply("A refund within 30 days."), Reply("No refund.")),
    ({"kind": "regex", "pattern": r"order #\d+"}, Reply("Your order #123 shipped."), Reply("Your order shipped.")),
    ({"kind": "json_schema", "schema": {"type": "object", "required": ["total"],
                                        "properties": {"total": {"type": "number"}}}},
     Reply('{"total": 5}'), Reply('{"total": "five"}')),
    ({"kind": "callable", "path": f"{__name__}.polite"}, Reply("Wait, please."), Reply("Wait.")),
    ({"kind": "tool_calls", "calls": [{"name": "add", "arguments": {"a": 2}}]},
     Reply("5", tool_calls=CALLS), Reply("5", tool_calls=[{"name": "add", "arguments": {"a": 3}}])),
    ({"kind": "tool_calls", "calls": [{"name": "add"}], "only": True},
     Reply("5", tool_calls=CALLS[:1]), Reply("5", tool_calls=CALLS)),
]


@pytest.mark.parametrize(("spec", "passing", "failing"), CASES, ids=[str(case[0]["kind"]) for case in CASES])
def test_each_evaluator_scores_a_passing_and_a_failing_reply(spec: dict[str, Any], passing: Reply,
                                                             failing: Reply) -> None:
    good, bad = evaluate(spec, passing), evaluate(spec, failing)
    assert (good.kind, good.score) == (spec["kind"], 1.0) and good.reason
    assert bad.score < 1.0 and bad.reason and bad.reason != good.reason


def test_a_json_reply_that_is_not_json_fails_with_the_reason() -> None:
    score = evaluate({"kind": "json_schema", "schema": {}}, Reply("not json"))
    assert score.score == 0 and score.reason.startswith("the reply is not JSON")


def test_unknown_kinds_and_unmarked_callables_are_refused() -> None:
    with pytest.raises(UnknownEvaluatorError, match="Unknown evaluator kind 'vibes'"):
        evaluate({"kind": "vibes"}, Reply("x"))
    with pytest.raises(UnknownEvaluatorError, match="is not marked"):
        evaluate({"kind": "callable", "path": f"{__name__}.not_marked"}, Reply("x"))
    with pytest.raises(UnknownEvaluatorError, match="is not marked"):
        evaluate({"kind": "callable", "path": "os.system"}, Reply("x"))


@pytest.mark.django_db
def test_a_judge_grades_with_its_rubric_and_its_cost_is_recorded(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text('{"score": 1, "reason": "polite and correct"}', usage=(120, 9), cost=0.002),
                       text("FAIL: rude", usage=(100, 3), cost=0.001))
    spec = {"kind": "judge", "robot": "echo", "rubric": "Polite and correct."}
    good = evaluate(spec, Reply("It is 5, thanks!", input="2+3?", reference="5"))
    bad = evaluate(spec, Reply("Go away.", input="2+3?", reference="5"))
    assert (good.score, good.reason, good.cost) == (1.0, "polite and correct", 0.002)
    assert good.input_tokens >= 120 and good.output_tokens >= 9 and good.extra["robot"] == "echo"
    assert (bad.score, bad.cost) == (0.0, 0.001)
    assert "Polite and correct." in llm.requests[0].messages[-1]["content"]
    assert "It is 5, thanks!" in llm.requests[0].messages[-1]["content"]


def test_verdicts_are_read_from_json_pass_fail_or_a_number() -> None:
    assert parse_verdict('```json\n{"score": 0.5, "reason": "half"}\n```') == (0.5, "half")
    assert parse_verdict("PASS") == (1.0, "PASS")
    assert parse_verdict("Score: 0.75 because")[0] == 0.75
    assert parse_verdict("dunno") == (0.0, "unreadable verdict: 'dunno'")
    assert "Rubric:\nBe kind." in judge_prompt("Be kind.", Reply("hi"))


def test_a_score_is_json_ready() -> None:
    assert Score("exact", 1.0, "ok").to_dict()["kind"] == "exact"
