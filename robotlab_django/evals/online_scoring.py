"""Scoring one production run with its robot's online evaluators, stored as an :class:`OnlineScore`.

:func:`score_run` is the service behind the background job (:mod:`robotlab_django.evals.online_task` under Celery,
a thread or the caller otherwise: :mod:`robotlab_django.evals.online`). The evaluators are the specs of eval
cases' expectations (:mod:`robotlab_django.evals.evaluators`), reading the run's reply, the tools it called and its
message (a production run has no reference reply). An evaluator that raises is recorded with its error and left
out of the run's score, so a broken evaluator (a judge whose provider is down) never drags the rolling score down.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction

from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.conf import app_settings
from robotlab_django.evals.evaluators import Reply, Score, evaluate
from robotlab_django.evals.replay import EVAL_THREAD_PREFIX, tool_calls_of
from robotlab_django.models import OnlineScore, RobotResult

__all__ = ["OnlineConfig", "online_config", "score_reply", "score_run"]

logger = logging.getLogger("robotlab_django")

_warned: set[str] = set()


class OnlineConfig:
    """A robot's online evals: the share of its runs scored (``rate``, 0-1) and the evaluator specs."""

    def __init__(self, rate: float, evaluators: Sequence[Mapping[str, Any]]) -> None:
        self.rate = rate
        self.evaluators = [dict(spec) for spec in evaluators]


def _warn_once(robot_name: str, message: str) -> None:
    if robot_name not in _warned:
        _warned.add(robot_name)
        logger.warning("robotlab: ROBOTLAB['ONLINE_EVALS'][%r] %s; its runs are not scored", robot_name, message)


def online_config(robot_name: str) -> OnlineConfig | None:
    """``robot_name``'s online evals from ``ROBOTLAB["ONLINE_EVALS"]`` (read afresh), ``None`` without any.

    A malformed entry (a rate outside 0-1, evaluators that are not a list of specs with a ``kind``) is warned
    about once and treated as none.
    """
    everything = app_settings.ONLINE_EVALS
    entry = everything.get(robot_name) if isinstance(everything, Mapping) else None
    if entry is None:
        return None
    rate = entry.get("rate") if isinstance(entry, Mapping) else None
    evaluators = entry.get("evaluators") if isinstance(entry, Mapping) else None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        _warn_once(robot_name, "needs a 'rate' from 0 to 1")
        return None
    if not isinstance(evaluators, list) or not evaluators or not all(
            isinstance(spec, Mapping) and spec.get("kind") for spec in evaluators):
        _warn_once(robot_name, "needs 'evaluators': a list of specs, each with a 'kind'")
        return None
    return OnlineConfig(float(rate), evaluators) if rate > 0 else None


def score_reply(specs: Sequence[Mapping[str, Any]], reply: Reply) -> list[Score]:
    """Each spec's verdict on ``reply``; a spec that raises gives a ``Score`` marked ``extra["error"]``."""
    scores = []
    for spec in specs:
        try:
            scores.append(evaluate(spec, reply))
        except Exception as exc:  # noqa: BLE001 - a broken evaluator is recorded, never raised
            scores.append(Score(str(spec.get("kind", "?")), 0.0, f"{type(exc).__name__}: {exc}",
                                extra={"error": True}))
    return scores


def _stored(row: RobotResult, scores: list[Score]) -> OnlineScore:
    counted = [score.score for score in scores if not score.extra.get("error")]
    own = isinstance(row, RobotResult)  # a project's own result model: the reasons are not kept (see the model)
    values = [score.to_dict() if own else {**score.to_dict(), "reason": ""} for score in scores]
    fields = {
        "robot_name": row.robot_name, "version_id": row.version_id, "code_hash": row.code_hash or "",
        "result": row if own else None, "score": sum(counted) / len(counted) if counted else None,
        "scores": values, "input_tokens": sum(score.input_tokens for score in scores),
        "output_tokens": sum(score.output_tokens for score in scores),
        "cost": Decimal(str(sum(score.cost for score in scores))),
    }
    try:
        with transaction.atomic():
            created: OnlineScore = OnlineScore.objects.create(run_id=row.run_id, **fields)
            return created
    except IntegrityError:  # a second delivery of the same run's job: the first one's score stands
        return OnlineScore.objects.get(run_id=row.run_id)


def score_run(result_id: int) -> OnlineScore | None:
    """Score the completed run ``result_id`` with its robot's online evaluators and store the score.

    Returns the stored score (the one already stored when the run was scored before), or ``None`` when the run is
    missing, did not complete, ran on an eval's thread, or its robot has no online evals any more.

    Raises:
        DatabaseError: the score could not be read or stored (the caller logs it; the run is untouched).
    """
    model = swappable.result_model()
    row = model.objects.filter(pk=result_id).first()
    if row is None or row.status != Status.COMPLETED:
        return None
    config = online_config(row.robot_name)
    if config is None:
        return None
    existing = OnlineScore.objects.filter(run_id=row.run_id).first()
    if existing is not None:
        return existing
    session_id = (swappable.thread_model().objects.filter(pk=row.thread_id)
                  .values_list("session_id", flat=True).first() or "")
    if str(session_id).startswith(EVAL_THREAD_PREFIX):
        return None
    reply = Reply(text=row.reply or "", tool_calls=tool_calls_of(row.messages or []), input=row.input or "")
    return _stored(row, score_reply(config.evaluators, reply))
