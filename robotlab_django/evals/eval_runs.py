"""A run of an eval set against a robot version: every case replayed and scored, stored as an ``EvalRun``.

A case's score is the mean of its evaluators' scores (a case without expectations is scored ``exact`` against its
reference); it passes at :data:`PASS_SCORE` or more. The run's score is the mean over its cases; its tokens, cost
and duration add up the cases' runs and the judges' calls. With tracing on, each case's trace gets a
``gen_ai.evaluation.result`` event per evaluator (:mod:`robotlab_django.evals.trace_events`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from functools import partial
from typing import Any

from django.db import close_old_connections, connections

from robotlab_django.evals.evaluators import Reply, Score, evaluate
from robotlab_django.evals.replay import CaseRun, replay_case
from robotlab_django.evals.trace_events import case_span
from robotlab_django.models import EvalCase, EvalCaseResult, EvalRun, EvalSet, RobotVersion

__all__ = ["PASS_SCORE", "format_table", "run_eval", "score_case"]

#: A case passes when its score is at least this.
PASS_SCORE = 0.5


def score_case(case: EvalCase, run: CaseRun) -> list[Score]:
    """Each of ``case``'s evaluators' verdict on ``run`` (a failed run scores 0, with its error)."""
    if run.error:
        return [Score("run", 0.0, run.error)]
    reply = Reply(text=run.reply, tool_calls=run.tool_calls, input=case.input, reference=case.reference)
    specs = list(case.expectations or []) or [{"kind": "exact"}]
    scores = []
    for spec in specs:
        try:
            scores.append(evaluate(spec, reply))
        except Exception as exc:  # noqa: BLE001 - a broken evaluator scores its case 0 and says why
            scores.append(Score(str(spec.get("kind", "?")), 0.0, f"{type(exc).__name__}: {exc}"))
    return scores


def _one(eval_run: EvalRun, case: EvalCase, version: RobotVersion | None, offline: bool,
         timeout: float) -> EvalCaseResult:
    with case_span(eval_run, case) as traced:  # the case's run continues its trace
        run = replay_case(case, eval_run.robot_name, version, key=f"{eval_run.pk}-{case.pk}", offline=offline,
                          timeout=timeout)
        scores = score_case(case, run)
        score = sum(score.score for score in scores) / len(scores)
        traced.record(run.row, scores, score, PASS_SCORE)  # gen_ai.evaluation.result events
    return EvalCaseResult.objects.create(
        eval_run=eval_run, case=case, result=run.row, reply=run.reply, error=run.error,
        score=score, scores=[score.to_dict() for score in scores],
        input_tokens=run.input_tokens + sum(score.input_tokens for score in scores),
        output_tokens=run.output_tokens + sum(score.output_tokens for score in scores),
        cost=Decimal(str(run.cost + sum(score.cost for score in scores))), latency=run.latency)


def _in_thread(job: Callable[[], EvalCaseResult]) -> EvalCaseResult:
    close_old_connections()
    try:
        return job()
    finally:
        connections.close_all()  # this worker thread's own connections


def run_eval(robot_name: str, eval_set: EvalSet, version: RobotVersion | None, *, offline: bool = False,
             concurrency: int = 1, timeout: float = 300.0) -> EvalRun:
    """Replay every case of ``eval_set`` against ``robot_name`` at ``version`` and store the scored ``EvalRun``.

    Args:
        robot_name: The robot.
        eval_set: The cases.
        version: The version every case runs (``None``: the robot's rollout, else its code).
        offline: Replay each case's recorded model outputs instead of calling the model.
        concurrency: How many cases run at once (each waits on its run: with Celery, workers run them).
        timeout: How long to wait for each live case.
    """
    started = time.monotonic()
    eval_run = EvalRun.objects.create(eval_set=eval_set, robot_name=robot_name, version=version, offline=offline)
    cases = list(eval_set.cases.order_by("pk"))
    jobs: list[Callable[[], EvalCaseResult]] = [partial(_one, eval_run, case, version, offline, timeout)
                                                for case in cases]
    if concurrency > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="robotlab-eval") as pool:
            results = list(pool.map(_in_thread, jobs))
    else:
        results = [job() for job in jobs]
    eval_run.cases = len(results)
    eval_run.passed = sum(result.score >= PASS_SCORE for result in results)
    eval_run.score = sum(result.score for result in results) / len(results) if results else None
    eval_run.input_tokens = sum(result.input_tokens for result in results)
    eval_run.output_tokens = sum(result.output_tokens for result in results)
    eval_run.cost = sum((Decimal(result.cost) for result in results), Decimal(0))
    eval_run.duration = time.monotonic() - started
    eval_run.save()
    return eval_run


def format_table(eval_run: EvalRun) -> str:
    """The run's cases as a plain-text table (case, score, latency, tokens, cost, first reason), then its totals."""
    header = ("case", "score", "latency", "tokens", "cost", "reason")
    rows: list[tuple[str, ...]] = [header]
    for result in eval_run.results.select_related("case").order_by("case_id"):
        reasons: list[Any] = [score.get("reason", "") for score in result.scores if score.get("score", 0) < 1]
        rows.append((str(result.case)[:40], f"{result.score:.2f}",
                     "-" if result.latency is None else f"{result.latency:.2f}s",
                     str(result.input_tokens + result.output_tokens), f"{result.cost}",
                     str(reasons[0] if reasons else "ok")[:60].replace("\n", " ")))
    widths = [max(len(row[index]) for row in rows) for index in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    score = "-" if eval_run.score is None else f"{eval_run.score:.3f}"
    lines.append(f"{eval_run.passed}/{eval_run.cases} passed, score {score}, "
                 f"{eval_run.input_tokens + eval_run.output_tokens} tokens, cost {eval_run.cost}, "
                 f"{eval_run.duration or 0:.2f}s")
    return "\n".join(lines)
