"""A model as judge: a registered robot grades a reply against a rubric; its tokens, cost and version recorded.

The judge robot gets the rubric, the case's message, the reference and the reply, and answers
``{"score": 0.0-1.0, "reason": "..."}`` (a bare number, or PASS/FAIL, is understood too). Its version
(``"version"`` in the spec: a number, a label or ``current``) applies like a run's; without one the judge
runs the version its robot's rollout gives the eval, else its code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from robotlab_django.evals.verdicts import Reply, Score
from robotlab_django.runs.records import reply_text
from robotlab_django.runs.runnables import build_robot
from robotlab_django.versions.choice import resolve
from robotlab_django.versions.parts import apply

if TYPE_CHECKING:
    from robotlab.llm import LLM

__all__ = ["judge", "judge_prompt", "parse_verdict"]

_NUMBER = re.compile(r"(?<![\w.])(0(?:\.\d+)?|1(?:\.0+)?)(?![\w.])")


def judge_prompt(rubric: str, reply: Reply) -> str:
    """The message the judge robot gets."""
    return (f"Grade the reply below against the rubric.\n\nRubric:\n{rubric}\n\nUser message:\n{reply.input}\n\n"
            f"Reference reply:\n{reply.reference}\n\nReply to grade:\n{reply.text}\n\n"
            'Answer with JSON only: {"score": <a number from 0 to 1>, "reason": "<one sentence>"}.')


def parse_verdict(text: str) -> tuple[float, str]:
    """The judge's ``(score, reason)``; a verdict it cannot read scores 0 with the text as the reason."""
    stripped = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        data = json.loads(stripped)
    except ValueError:
        data = None
    if isinstance(data, Mapping) and isinstance(data.get("score"), int | float):
        return min(max(float(data["score"]), 0.0), 1.0), str(data.get("reason", ""))
    upper = stripped.upper()
    if upper.startswith(("PASS", "FAIL")):
        return (1.0 if upper.startswith("PASS") else 0.0), stripped
    found = _NUMBER.search(stripped)
    if found:
        return float(found.group(1)), stripped
    return 0.0, f"unreadable verdict: {stripped[:200]!r}"


def judge(spec: Mapping[str, Any], reply: Reply, *, llm: LLM | None = None) -> Score:
    """Ask the robot ``spec["robot"]`` to grade ``reply`` against ``spec["rubric"]``.

    Raises:
        UnknownRobotError: no robot has that name.
        NoSuchVersionError: ``spec["version"]`` names no version of it.
    """
    name = str(spec["robot"])
    robot: Any = build_robot(name, llm=llm)
    version = resolve(name, spec["version"]) if spec.get("version") else None
    if version is not None:
        apply(robot, version)
    result = robot.run(judge_prompt(str(spec.get("rubric", "")), reply))
    score, reason = parse_verdict(reply_text(result.reply))
    return Score("judge", score, reason, cost=float(result.cost or 0), input_tokens=int(result.input_tokens or 0),
                 output_tokens=int(result.output_tokens or 0),
                 extra={"robot": name, "version": version.number if version else None, "model": result.model})
