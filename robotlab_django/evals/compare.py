"""Two eval runs side by side: each case's score in both, the cases that got worse first, cost and latency deltas.

:func:`compare_runs` matches the two runs' case results by case; a delta is the second run's figure minus the
first's (the first is the older run, the baseline, when the admin compares). The rows come in the order a
reviewer reads them: the cases that got worse (the worst drop first), the cases only one run has, the unchanged,
then the better (the biggest gain first). Nothing here makes HTML: the admin renders the rows with autoescaping
and the chart through :mod:`robotlab_django.evals.charts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from robotlab_django.models import EvalCaseResult, EvalRun

__all__ = ["SAME", "CaseRow", "Comparison", "RunTotals", "Side", "compare_runs"]

#: Scores closer than this are the same.
SAME = 1e-9

#: Where each kind of change sorts (worse first).
_ORDER = {"worse": 0, "removed": 1, "added": 1, "same": 2, "better": 3}


@dataclass(frozen=True)
class Side:
    """One run's result for a case: its score, the first reason it lost points, usage and latency."""

    score: float
    reason: str
    error: str
    tokens: int
    cost: Decimal
    latency: float | None

    @classmethod
    def of(cls, result: EvalCaseResult) -> Side:
        """The side of the stored case result ``result``."""
        reasons = [str(score.get("reason", "")) for score in result.scores or []
                   if isinstance(score, dict) and float(score.get("score", 0) or 0) < 1]
        return cls(score=float(result.score), reason=reasons[0] if reasons else "", error=result.error or "",
                   tokens=int(result.input_tokens) + int(result.output_tokens), cost=Decimal(result.cost or 0),
                   latency=result.latency)


def _minus(new: float | None, old: float | None) -> float | None:
    return None if new is None or old is None else new - old


@dataclass(frozen=True)
class CaseRow:
    """A case in both runs (``base``: the first, ``other``: the second; ``None`` where a run lacks it)."""

    case_id: int
    name: str
    base: Side | None
    other: Side | None

    @property
    def score_delta(self) -> float | None:
        """The second score minus the first (``None`` unless both runs have the case)."""
        return None if self.base is None or self.other is None else self.other.score - self.base.score

    @property
    def cost_delta(self) -> Decimal | None:
        """The second cost minus the first."""
        return None if self.base is None or self.other is None else self.other.cost - self.base.cost

    @property
    def latency_delta(self) -> float | None:
        """The second latency minus the first, in seconds."""
        return None if self.base is None or self.other is None else _minus(self.other.latency, self.base.latency)

    @property
    def change(self) -> str:
        """``worse``, ``better``, ``same``, ``added`` (only in the second run) or ``removed`` (only in the first)."""
        if self.base is None:
            return "added"
        if self.other is None:
            return "removed"
        delta = self.other.score - self.base.score
        return "same" if abs(delta) < SAME else "worse" if delta < 0 else "better"

    def sort_key(self) -> tuple[int, float, str, int]:
        """Worse first (the biggest drop first), then the cases one run lacks, the unchanged, the better."""
        delta = self.score_delta or 0.0
        return _ORDER[self.change], delta if self.change == "worse" else -delta, self.name, self.case_id


@dataclass(frozen=True)
class RunTotals:
    """A run's figures: score, passed cases, tokens, cost, the mean latency of its cases and its duration."""

    score: float | None
    passed: int
    cases: int
    tokens: int
    cost: Decimal
    mean_latency: float | None
    duration: float | None

    @classmethod
    def of(cls, run: EvalRun, sides: list[Side]) -> RunTotals:
        """The totals of ``run`` whose case results are ``sides``."""
        latencies = [side.latency for side in sides if side.latency is not None]
        return cls(score=run.score, passed=run.passed, cases=run.cases, tokens=run.input_tokens + run.output_tokens,
                   cost=Decimal(run.cost or 0), mean_latency=sum(latencies) / len(latencies) if latencies else None,
                   duration=run.duration)


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: their totals, the deltas (second minus first) and the case rows, worse first."""

    base: EvalRun
    other: EvalRun
    base_totals: RunTotals
    other_totals: RunTotals
    rows: list[CaseRow]

    @property
    def score_delta(self) -> float | None:
        """The second run's score minus the first's."""
        return _minus(self.other_totals.score, self.base_totals.score)

    @property
    def passed_delta(self) -> int:
        """Passed cases, second minus first."""
        return self.other_totals.passed - self.base_totals.passed

    @property
    def tokens_delta(self) -> int:
        """Tokens, second minus first."""
        return self.other_totals.tokens - self.base_totals.tokens

    @property
    def cost_delta(self) -> Decimal:
        """Cost in USD, second minus first."""
        return self.other_totals.cost - self.base_totals.cost

    @property
    def latency_delta(self) -> float | None:
        """Mean case latency in seconds, second minus first."""
        return _minus(self.other_totals.mean_latency, self.base_totals.mean_latency)

    @property
    def duration_delta(self) -> float | None:
        """The runs' durations in seconds, second minus first."""
        return _minus(self.other_totals.duration, self.base_totals.duration)

    @property
    def counts(self) -> dict[str, int]:
        """How many cases got worse, better, stayed the same, were added or removed."""
        found = dict.fromkeys(("worse", "better", "same", "added", "removed"), 0)
        for row in self.rows:
            found[row.change] += 1
        return found

    @property
    def same_set(self) -> bool:
        """Whether both runs replayed the same eval set."""
        return bool(self.base.eval_set_id == self.other.eval_set_id)


def _sides(run: EvalRun) -> dict[int, tuple[str, Side]]:
    results: Any = run.results.select_related("case").order_by("case_id")
    return {result.case_id: (str(result.case), Side.of(result)) for result in results}


def compare_runs(base: EvalRun, other: EvalRun) -> Comparison:
    """``other`` against ``base``: their totals and a row per case of either run, worse first (see the module)."""
    before, after = _sides(base), _sides(other)
    rows = [CaseRow(case_id=case_id, name=(after.get(case_id) or before[case_id])[0],
                    base=before[case_id][1] if case_id in before else None,
                    other=after[case_id][1] if case_id in after else None)
            for case_id in {*before, *after}]
    rows.sort(key=CaseRow.sort_key)
    return Comparison(base=base, other=other, rows=rows,
                      base_totals=RunTotals.of(base, [side for _name, side in before.values()]),
                      other_totals=RunTotals.of(other, [side for _name, side in after.values()]))
