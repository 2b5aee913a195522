"""robotlab.E005: ``ROBOTLAB["ONLINE_EVALS"]``'s bad robots, rates and evaluators named at ``manage.py check``."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from robotlab_django.evals.checks import check_online_evals
from robotlab_django.evals.evaluators import Reply, evaluator

REGEX = {"kind": "regex", "pattern": r"order #\d+"}


@evaluator
def polite(reply: Reply) -> bool:
    """A marked evaluator: the reply says please."""
    return "please" in reply.text


def unmarked(reply: Reply) -> bool:
    """A function no one marked as an evaluator."""
    return True


def _online(settings: Any, value: Any) -> list[str]:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ONLINE_EVALS": value}
    messages = check_online_evals()
    assert all(message.id == "robotlab.E005" for message in messages)
    return [message.msg for message in messages]


def test_a_good_configuration_and_none_pass(settings: Any) -> None:
    assert _online(settings, {}) == []
    good = {"echo": {"rate": 0.1, "evaluators": [
        REGEX, {"kind": "exact", "value": "Hi"}, {"kind": "contains", "value": ["a", "b"]},
        {"kind": "json_schema", "schema": {"type": "object"}}, {"kind": "callable", "path": f"{__name__}.polite"},
        {"kind": "tool_calls", "calls": [{"name": "add"}]}, {"kind": "judge", "robot": "echo", "rubric": "Kind."}]},
        "calculator": {"rate": 1, "evaluators": [REGEX]}}
    assert _online(settings, good) == []


@pytest.mark.parametrize(("entry", "fragment"), [
    ({"rate": 1.5, "evaluators": [REGEX]}, "the sampling rate 1.5; it must be a number from 0 to 1"),
    ({"rate": -0.1, "evaluators": [REGEX]}, "the sampling rate -0.1"),
    ({"rate": "10%", "evaluators": [REGEX]}, "the sampling rate '10%'"),
    ({"rate": True, "evaluators": [REGEX]}, "the sampling rate True"),
    ({"evaluators": [REGEX]}, "the sampling rate None"),
    ({"rate": 0.1, "evaluators": []}, "the evaluators []; they must be a non-empty list"),
    ({"rate": 0.1, "evaluators": REGEX}, "they must be a non-empty list"),
    ({"rate": 0.1, "evaluators": ["regex"]}, "evaluator 0 is 'regex', not a spec"),
    ({"rate": 0.1, "evaluators": [REGEX, {"kind": "regexp"}]}, "evaluator 1 has the unknown kind 'regexp'"),
    ({"rate": 0.1, "evaluators": [{"kind": "regex"}]}, "evaluator 0 (regex) lacks 'pattern'"),
    ({"rate": 0.1, "evaluators": [{"kind": "regex", "pattern": "(unclosed"}]},
     "'pattern' '(unclosed' does not compile"),
    ({"rate": 0.1, "evaluators": [{"kind": "json_schema", "schema": "object"}]}, "'schema' is 'object', not a dict"),
    ({"rate": 0.1, "evaluators": [{"kind": "callable", "path": "no_such_module.score"}]},
     "(callable) 'path' 'no_such_module.score' cannot be imported"),
    ({"rate": 0.1, "evaluators": [{"kind": "callable", "path": f"{__name__}.unmarked"}]},
     f"'path' '{__name__}.unmarked' is not marked"),
    ({"rate": 0.1, "evaluators": [{"kind": "callable", "path": "os.system"}]}, "'os.system' is not marked"),
    ({"rate": 0.1, "evaluators": [{"kind": "judge", "robot": "nobody", "rubric": "x"}]},
     "(judge) 'robot' 'nobody' is no registered robot"),
    ({"rate": 0.1, "evaluators": [REGEX], "sample": 0.5}, "unknown keys ['sample']"),
    (0.1, "is 0.1, not a dict with 'rate' and 'evaluators'"),
])
def test_each_bad_value_is_an_error_naming_the_robot_and_the_value(settings: Any, entry: Any, fragment: str) -> None:
    messages = _online(settings, {"echo": entry})
    assert len(messages) == 1, messages
    assert messages[0].startswith("ROBOTLAB['ONLINE_EVALS']['echo'] ") and fragment in messages[0], messages


def test_an_unknown_robot_is_named_with_the_known_ones(settings: Any) -> None:
    messages = _online(settings, {"ehco": {"rate": 0.1, "evaluators": [REGEX]}})
    assert len(messages) == 1 and "names the robot 'ehco', which is not registered" in messages[0]
    assert "'echo'" not in messages[0] and "echo" in messages[0]  # the known names, to spot the typo


def test_every_problem_of_every_robot_is_reported(settings: Any) -> None:
    messages = _online(settings, {"echo": {"rate": 2, "evaluators": [{"kind": "nope"}, {"kind": "regex"}]},
                                  "calculator": {"rate": 0.5, "evaluators": [REGEX]}, "ghost": {}})
    assert len(messages) == 4, messages
    assert not any(message.startswith("ROBOTLAB['ONLINE_EVALS']['calculator']") for message in messages), messages


def test_a_value_that_is_not_a_dict_is_left_to_e002(settings: Any) -> None:
    assert _online(settings, ["echo"]) == []


def test_manage_py_check_fails_on_it(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ONLINE_EVALS": {"echo": {"rate": 10, "evaluators": [REGEX]}}}
    with pytest.raises(SystemCheckError, match=r"robotlab\.E005.*the sampling rate 10;"):
        call_command("check")
