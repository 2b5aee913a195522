"""Celery: the ``score_online_run`` task, which scores one sampled production run off the run's path.

Thin, like :mod:`robotlab_django.tasks`: it takes the run's primary key and calls
:func:`robotlab_django.evals.online_scoring.score_run`, which stores one score per run (a second delivery finds it
stored). Every process that loaded Celery before Django's set up (a Celery worker does) registers it
(:func:`robotlab_django.evals.online.connect_signals`, from the app's ``ready()``). Its failures stay in the worker:
the run it scores completed before it was sent.
"""

from __future__ import annotations

from celery import shared_task

from robotlab_django.evals.online_scoring import score_run

__all__ = ["TASK_NAME", "score_online_run"]

#: The task's name in messages.
TASK_NAME = "robotlab_django.evals.score_online_run"


@shared_task(name=TASK_NAME, ignore_result=True)
def score_online_run(result_id: int) -> float | None:
    """Score the completed run ``result_id`` with its robot's online evaluators; its score (``None``: not scored)."""
    found = score_run(result_id)
    return None if found is None else found.score
