"""What evaluators see and say: the :class:`Reply` of a case's run, and a :class:`Score` with its reason.

An evaluator (:mod:`robotlab_django.evals.evaluators`) reads a :class:`Reply` (the reply, the tools the run called,
the case's message and reference) and returns a :class:`Score` from 0 to 1 with a reason; a judge's score also
carries the tokens and cost of its model call, which the eval run adds to its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Reply", "Score"]


@dataclass(frozen=True)
class Reply:
    """What a case's run produced, as evaluators see it.

    Args:
        text: The reply.
        tool_calls: The tools the run called: ``{"name": ..., "arguments": {...}}`` each, in order.
        input: The case's message.
        reference: The case's reference reply.
    """

    text: str
    tool_calls: Sequence[Mapping[str, Any]] = ()
    input: str = ""
    reference: str = ""


@dataclass
class Score:
    """One evaluator's verdict: ``score`` from 0 to 1, ``reason``, and what a judge spent."""

    kind: str
    score: float
    reason: str
    cost: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The verdict as JSON-ready values (what an eval run stores per case)."""
        return asdict(self)
