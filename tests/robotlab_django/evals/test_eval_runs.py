"""Cases from stored runs and YAML, replayed live and offline, scored, stored; the command's table and exit code."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django import services
from robotlab_django.evals.cases import CaseFileError, case_from_run, load_yaml
from robotlab_django.evals.eval_runs import run_eval
from robotlab_django.models import EvalCase, EvalSet, RobotResult, RobotVersion
from robotlab_django.versions.choice import set_current

pytestmark = pytest.mark.django_db

YAML = """
set: smoke
description: Must still work.
cases:
  - name: greet
    input: Hello
    reference: Hi there!
    expectations: [{kind: contains, value: Hi}]
    recorded: [{content: "Hi there!", input_tokens: 10, output_tokens: 3, cost: 0.001}]
  - name: sum
    history: [{role: user, content: I will ask sums.}, {role: assistant, content: Sure.}]
    input: 2+3?
    expectations: [{kind: regex, pattern: "5"}]
    recorded: [{content: "It is 5."}]
"""


def test_a_case_promoted_from_a_stored_run_keeps_history_input_reference_and_outputs(
        scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("Hello!"), tool_call("add", id="c1", a=2, b=3), text("It is 5."))
    services.run_robot("s1", "calculator", "Hi")
    row = services.run_robot("s1", "calculator", "2+3?")
    case = case_from_run(row, EvalSet.objects.create(name="calc"),
                         expectations=[{"kind": "tool_calls", "calls": [{"name": "add"}]}])
    assert case.history == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    assert (case.input, case.reference, case.source_id) == ("2+3?", "It is 5.", row.pk)
    assert [output.get("content") for output in case.recorded][-1] == "It is 5."


def test_a_promoted_case_replays_live_and_offline(scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_call("add", id="c1", a=2, b=3), text("It is 5."))
    row = services.run_robot("s1", "calculator", "2+3?")
    eval_set = EvalSet.objects.create(name="calc")
    case_from_run(row, eval_set, expectations=[{"kind": "contains", "value": "5"},
                                               {"kind": "tool_calls", "calls": [{"name": "add",
                                                                                 "arguments": {"a": 2}}]}])
    offline = run_eval("calculator", eval_set, None, offline=True)
    assert (offline.score, offline.passed, offline.cases) == (1.0, 1, 1)
    live_llm = scripted_llm(tool_call("add", id="c9", a=2, b=3), text("Five: 5."))
    live = run_eval("calculator", eval_set, None)
    assert live.score == 1.0 and len(live_llm.requests) == 2
    result = live.results.get()
    assert result.reply == "Five: 5." and result.latency is not None and result.result is not None
    assert [score["kind"] for score in result.scores] == ["contains", "tool_calls"]


def test_an_eval_pins_its_version_and_records_it_on_each_case_run(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("Hi there!"), text("It is 5."))
    eval_set, count = load_yaml(YAML)
    assert (eval_set.name, eval_set.description, count) == ("smoke", "Must still work.", 2)
    set_current(RobotVersion.objects.create(robot_name="echo", number=1, prompt="Old."))
    pinned = RobotVersion.objects.create(robot_name="echo", number=2, prompt="New prompt.", model="m-2")
    eval_run = run_eval("echo", eval_set, pinned)
    assert eval_run.version == pinned and eval_run.score == 1.0
    assert [request.messages[0]["content"] for request in llm.requests] == ["New prompt.", "New prompt."]
    assert llm.requests[1].messages[1:3] == [{"role": "user", "content": "I will ask sums."},
                                             {"role": "assistant", "content": "Sure."}]
    assert {row.version for row in RobotResult.objects.filter(pk__in=eval_run.results.values("result"))} == {pinned}


def test_loading_yaml_again_replaces_named_cases_and_bad_files_are_refused() -> None:
    load_yaml(YAML)
    load_yaml(YAML.replace("Hi there!", "Hello there!"))
    assert EvalCase.objects.count() == 2
    assert EvalCase.objects.get(name="greet").reference == "Hello there!"
    with pytest.raises(CaseFileError, match="'set'"):
        load_yaml("cases: []")
    with pytest.raises(CaseFileError, match="unknown keys"):
        load_yaml("set: x\ncases: [{inptu: typo}]")


def test_the_command_prints_a_table_and_its_exit_code_follows_the_threshold(tmp_path: Path) -> None:
    path = tmp_path / "smoke.yaml"
    path.write_text(YAML.replace("pattern: \"5\"", "pattern: \"6\""), encoding="utf-8")
    out = io.StringIO()
    call_command("robotlab_eval", "echo", "--load", str(path), "--offline", "--threshold", "0.5", stdout=out)
    table = out.getvalue()
    assert "Loaded 2 case(s) into 'smoke'." in table and "1/2 passed, score 0.500" in table
    assert "greet" in table and "no match for '6'" in table
    with pytest.raises(CommandError, match="under the threshold 0.9") as raised:
        call_command("robotlab_eval", "echo", "--set", "smoke", "--offline", "--threshold", "0.9",
                     "--concurrency", "1", stdout=io.StringIO())
    assert raised.value.returncode == 3


def test_the_command_refuses_unknown_robots_sets_and_versions() -> None:
    EvalSet.objects.create(name="empty")
    for argv, message in [(["nobody", "--set", "empty"], "No robot is registered"),
                          (["echo", "--set", "missing"], "No eval set is named 'missing'"),
                          (["echo", "--set", "empty", "--version", "canary"], "has no version 'canary'")]:
        with pytest.raises(CommandError, match=message):
            call_command("robotlab_eval", *argv, stdout=io.StringIO())
