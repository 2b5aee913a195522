"""Eval cases: promoted from a stored run, or written in YAML and loaded.

A case promoted from a run (:func:`case_from_run`) keeps the thread's messages before the run as its history, the
run's message as its input, its stored reply as the reference and its model responses (the run's checkpointed
LLM steps, else its reply) as the recorded outputs an offline eval replays. A YAML file (:func:`load_yaml`)::

    set: support-smoke
    description: What support must still answer.
    cases:
      - name: refund
        history: [{role: user, content: Hi}, {role: assistant, content: Hello!}]
        input: Can I get a refund?
        reference: Yes, within 30 days.
        expectations:
          - {kind: contains, value: 30 days}
        recorded: [{content: "Yes, within 30 days."}]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from django.db import transaction

from robotlab_django import swappable
from robotlab_django.models import EvalCase, EvalSet
from robotlab_django.runs.history import load_history

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["CaseFileError", "case_from_run", "load_yaml", "recorded_outputs"]

_CASE_KEYS = {"name", "history", "input", "reference", "expectations", "recorded"}


class CaseFileError(ValueError):
    """A YAML case file that does not describe an eval set."""


def _from_messages(row: RobotResult) -> list[dict[str, Any]]:
    """One response per assistant message the run appended; the row's tokens and cost go on the last."""
    outputs = [{"content": message.get("content"), "model": row.model,
                "tool_calls": [{"id": call.get("id"), "name": (call.get("function") or {}).get("name"),
                                "arguments": (call.get("function") or {}).get("arguments") or "{}"}
                               for call in message.get("tool_calls") or []]}
               for message in row.messages or [] if message.get("role") == "assistant"]
    if not outputs:
        outputs = [{"content": row.reply, "model": row.model, "tool_calls": []}]
    outputs[-1].update(input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost=float(row.cost or 0))
    return outputs


def recorded_outputs(row: RobotResult) -> list[dict[str, Any]]:
    """The model responses of the run ``row``, in order: its checkpointed LLM steps, else its assistant messages."""
    steps = swappable.step_model().objects.filter(result=row, kind="llm").order_by("idx")
    return [dict(output) for output in steps.values_list("output", flat=True)] or _from_messages(row)


def case_from_run(row: RobotResult, eval_set: EvalSet, *, name: str = "",
                  expectations: Sequence[Mapping[str, Any]] = ()) -> EvalCase:
    """A new case of ``eval_set`` from the stored run ``row`` (see the module's description)."""
    return EvalCase.objects.create(
        eval_set=eval_set, name=name or f"{row.robot_name} #{row.sequence_number} of thread {row.thread_id}",
        history=load_history(row.thread_id, before=row.sequence_number), input=row.input, reference=row.reply,
        expectations=[dict(spec) for spec in expectations], recorded=recorded_outputs(row), source=row)


def _check(index: int, case: object) -> dict[str, Any]:
    if not isinstance(case, Mapping):
        raise CaseFileError(f"case {index}: a mapping of {', '.join(sorted(_CASE_KEYS))}")
    unknown = sorted(set(case) - _CASE_KEYS)
    if unknown:
        raise CaseFileError(f"case {index}: unknown keys {unknown!r}")
    for key in ("history", "expectations", "recorded"):
        if not isinstance(case.get(key, []), list):
            raise CaseFileError(f"case {index}: {key!r} must be a list")
    return {"history": case.get("history", []), "input": str(case.get("input", "")),
            "reference": str(case.get("reference", "")), "expectations": case.get("expectations", []),
            "recorded": case.get("recorded", [])}


def load_yaml(source: str | Path) -> tuple[EvalSet, int]:
    """Load the eval set a YAML file (a path, or its text) describes: ``(the set, how many cases)``.

    A case with a name replaces the set's case of that name; the set is created when missing.

    Raises:
        CaseFileError: the YAML is not a set with a list of cases.
    """
    text = source.read_text(encoding="utf-8") if isinstance(source, Path) else source
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CaseFileError(f"not YAML: {exc}") from exc
    if not isinstance(data, Mapping) or not data.get("set") or not isinstance(data.get("cases"), list):
        raise CaseFileError("a YAML eval set has 'set' (its name) and 'cases' (a list)")
    cases = [(str(case.get("name") or ""), _check(index, case)) for index, case in enumerate(data["cases"], 1)]
    with transaction.atomic():
        eval_set, _created = EvalSet.objects.get_or_create(name=str(data["set"]))
        if data.get("description"):
            eval_set.description = str(data["description"])
            eval_set.save(update_fields=["description"])
        for name, fields in cases:
            if name:
                EvalCase.objects.update_or_create(eval_set=eval_set, name=name, defaults=fields)
            else:
                EvalCase.objects.create(eval_set=eval_set, **fields)
    return eval_set, len(cases)
