"""Evaluators: each scores one reply from 0 to 1 and says why.

An evaluator is a spec, a mapping with a ``kind`` (how cases store their expectations, in the admin or YAML):

* ``{"kind": "exact", "value": "...", "ignore_case": false}``: the reply is the value (default: the reference);
* ``{"kind": "contains", "value": "..." | [...], "ignore_case": false}``: the reply holds every value;
* ``{"kind": "regex", "pattern": "..."}``: the pattern matches somewhere in the reply;
* ``{"kind": "json_schema", "schema": {...}}``: the reply is JSON valid under the schema;
* ``{"kind": "callable", "path": "pkg.module.function"}``: a function marked :func:`evaluator` decides;
* ``{"kind": "tool_calls", "calls": [{"name": "add", "arguments": {"a": 2}}], "only": false}``: the run called
  each tool with (at least) those arguments; ``only``: and no other tool;
* ``{"kind": "judge", "robot": "grader", "rubric": "...", "version": "production"}``: a robot grades the reply
  (:mod:`robotlab_django.evals.judge`), its cost and version recorded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.utils.module_loading import import_string

from robotlab_django.evals.judge import judge
from robotlab_django.evals.verdicts import Reply, Score

__all__ = ["KINDS", "Reply", "Score", "UnknownEvaluatorError", "evaluate", "evaluator"]

F = TypeVar("F", bound=Callable[..., Any])


class UnknownEvaluatorError(ValueError):
    """A spec names no evaluator kind, or a callable that is not marked :func:`evaluator`."""


def evaluator(function: F) -> F:
    """Mark ``function(reply: Reply) -> float | bool | tuple[float, str] | Score`` usable by ``callable`` specs.

    Only marked functions run: a case's dotted path cannot name an arbitrary function (``os.system``).
    """
    function.robotlab_evaluator = True  # type: ignore[attr-defined]
    return function


def _fold(text: str, spec: Mapping[str, Any]) -> str:
    return text.casefold() if spec.get("ignore_case") else text


def _exact(spec: Mapping[str, Any], reply: Reply) -> Score:
    expected = str(spec.get("value", reply.reference))
    same = _fold(reply.text.strip(), spec) == _fold(expected.strip(), spec)
    return Score("exact", 1.0 if same else 0.0, "the reply is the expected text" if same
                 else f"expected {expected[:200]!r}, got {reply.text[:200]!r}")


def _contains(spec: Mapping[str, Any], reply: Reply) -> Score:
    value = spec.get("value", reply.reference)
    wanted = [str(item) for item in (value if isinstance(value, list) else [value])]
    missing = [item for item in wanted if _fold(item, spec) not in _fold(reply.text, spec)]
    score = (len(wanted) - len(missing)) / len(wanted) if wanted else 1.0
    return Score("contains", score, f"missing {missing!r}" if missing else f"contains {wanted!r}")


def _regex(spec: Mapping[str, Any], reply: Reply) -> Score:
    pattern = str(spec["pattern"])
    found = re.search(pattern, reply.text, re.IGNORECASE if spec.get("ignore_case") else 0)
    return Score("regex", 1.0 if found else 0.0, f"matches {pattern!r}" if found else f"no match for {pattern!r}")


def _json_schema(spec: Mapping[str, Any], reply: Reply) -> Score:
    import jsonschema

    try:
        value = json.loads(reply.text)
    except ValueError as exc:
        return Score("json_schema", 0.0, f"the reply is not JSON: {exc}")
    errors = sorted(jsonschema.Draft202012Validator(spec["schema"]).iter_errors(value), key=str)
    if errors:
        where = "/".join(str(part) for part in errors[0].absolute_path) or "the reply"
        return Score("json_schema", 0.0, f"{where}: {errors[0].message}")
    return Score("json_schema", 1.0, "the reply is valid under the schema")


def _callable(spec: Mapping[str, Any], reply: Reply) -> Score:
    path = str(spec["path"])
    try:
        function = import_string(path)
    except ImportError as exc:
        raise UnknownEvaluatorError(f"No evaluator function {path!r}: {exc}") from exc
    if not getattr(function, "robotlab_evaluator", False):
        raise UnknownEvaluatorError(f"{path!r} is not marked @robotlab_django.evals.evaluators.evaluator.")
    verdict = function(reply)
    if isinstance(verdict, Score):
        return verdict
    if isinstance(verdict, tuple):
        return Score("callable", float(verdict[0]), str(verdict[1]))
    return Score("callable", float(verdict), f"{path} returned {verdict!r}")


def _matches(expected: Mapping[str, Any], call: Mapping[str, Any]) -> bool:
    arguments = call.get("arguments") or {}
    return bool(call.get("name") == expected.get("name") and isinstance(arguments, Mapping) and all(
        arguments.get(key) == value for key, value in (expected.get("arguments") or {}).items()))


def _tool_calls(spec: Mapping[str, Any], reply: Reply) -> Score:
    expected = list(spec.get("calls") or [])
    missing = [call for call in expected if not any(_matches(call, made) for made in reply.tool_calls)]
    reasons = [f"no call of {call.get('name')!r} with {call.get('arguments') or {}!r}" for call in missing]
    extra: list[str] = []
    if spec.get("only"):
        names = {str(call.get("name")) for call in expected}
        extra = sorted({str(made.get("name")) for made in reply.tool_calls} - names)
        if extra:
            reasons.append(f"unexpected calls of {extra!r}")
    wanted = len(expected) + len(extra)
    score = (len(expected) - len(missing)) / wanted if wanted else 1.0
    return Score("tool_calls", score, "; ".join(reasons) or f"made the {len(expected)} expected calls")


#: The evaluators by kind, but ``judge`` (:mod:`robotlab_django.evals.judge`, which :func:`evaluate` calls).
KINDS: dict[str, Callable[[Mapping[str, Any], Reply], Score]] = {
    "exact": _exact, "contains": _contains, "regex": _regex, "json_schema": _json_schema, "callable": _callable,
    "tool_calls": _tool_calls,
}


def evaluate(spec: Mapping[str, Any], reply: Reply) -> Score:
    """Score ``reply`` with the evaluator ``spec`` describes.

    Raises:
        UnknownEvaluatorError: the spec's ``kind`` is unknown, or its callable is not an evaluator.
        KeyError: the spec lacks what its kind needs (``pattern``, ``schema``, ``path``, ``robot``).
    """
    kind = str(spec.get("kind", ""))
    if kind == "judge":
        return judge(spec, reply)
    if kind not in KINDS:
        raise UnknownEvaluatorError(f"Unknown evaluator kind {kind!r}; choose one of: "
                                    f"{', '.join([*sorted(KINDS), 'judge'])}.")
    return KINDS[kind](spec, reply)
