"""Online evals: a share of each robot's production runs scored in the background by its evaluators.

Configured per robot (read afresh at each run)::

    ROBOTLAB = {"ONLINE_EVALS": {"support": {"rate": 0.1, "evaluators": [
        {"kind": "judge", "robot": "grader", "rubric": "Polite, correct, cites the order number."},
        {"kind": "regex", "pattern": "order #\\\\d+"},
    ]}}}

Which runs: those whose :func:`sample_fraction` (a hash of the robot's name and the run's id, from 0 to 1) is under
the rate, so a run's choice is the same in every process and on every delivery, and over many runs the share
scored is the rate. When: after a run completed, its row stored and its last events sent (the runner's
:data:`~robotlab_django.runs.runner.run_completed`, connected by the app's ``ready()``); the run never waits on
its evaluators, and an evaluator's failure never reaches it. Where, by ``ROBOTLAB["EXECUTOR"]``:

* ``"celery"``: :func:`~robotlab_django.evals.online_task.score_online_run` is sent once the transaction commits;
* ``"thread"``: a background thread of this process (:func:`join` waits for them);
* ``"sync"``: at once, in the caller's thread, after the run (tests and scripts), in a context of its own, so a
  judge's spans are not taken for the run's.

The scoring itself is :func:`robotlab_django.evals.online_scoring.score_run`'s.
"""

from __future__ import annotations

import contextvars
import hashlib
import logging
import sys
import threading
from typing import TYPE_CHECKING

from django.db import close_old_connections, connections, transaction

from robotlab_django.conf import app_settings
from robotlab_django.evals.online_scoring import online_config, score_run
from robotlab_django.runs.runner import run_completed

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["connect_signals", "join", "sample_fraction", "sampled", "schedule"]

logger = logging.getLogger("robotlab_django")

_threads: set[threading.Thread] = set()
_threads_lock = threading.Lock()


def sample_fraction(robot_name: str, run_id: str) -> float:
    """Where the run ``run_id`` of ``robot_name`` falls in [0, 1): a hash, the same in every process."""
    digest = hashlib.sha256(f"online\x00{robot_name}\x00{run_id}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sampled(robot_name: str, run_id: str, rate: float) -> bool:
    """Whether online evals at ``rate`` (0-1) score the run ``run_id`` of ``robot_name``."""
    return sample_fraction(robot_name, run_id) < rate


def _score_quietly(pk: int) -> None:
    try:
        score_run(pk)
    except Exception:  # the run completed before: its scoring only logs
        logger.exception("robotlab: the online evals of run %s failed", pk)


def _in_background(pk: int) -> None:
    close_old_connections()
    try:
        _score_quietly(pk)
    finally:
        connections.close_all()  # this thread's own connections
        with _threads_lock:
            _threads.discard(threading.current_thread())


def _start_thread(pk: int) -> None:
    worker = threading.Thread(target=_in_background, args=(pk,), name=f"robotlab-online-eval-{pk}", daemon=True)
    with _threads_lock:
        _threads.add(worker)
    worker.start()


def _send(pk: int) -> None:
    from robotlab_django.evals.online_task import score_online_run  # Celery only where it is used

    try:
        score_online_run.apply_async(args=(pk,), queue=str(app_settings.TASK_QUEUE))
    except Exception:  # the broker is down: this run goes unscored, the run itself is done
        logger.exception("robotlab: the online evals of run %s could not be sent", pk)


def schedule(row: RobotResult) -> bool:
    """Score the completed ``row`` in the background when its robot's online evals sample it; whether they do."""
    config = online_config(row.robot_name)
    if config is None or not sampled(row.robot_name, str(row.run_id), config.rate):
        return False
    mode = app_settings.EXECUTOR
    if mode == "celery":
        transaction.on_commit(lambda: _send(row.pk), robust=True)
    elif mode == "thread":
        transaction.on_commit(lambda: _start_thread(row.pk), robust=True)
    else:  # "sync": now, outside the run's trace context and marks
        contextvars.Context().run(_score_quietly, row.pk)
    return True


def _on_run_completed(sender: object = None, row: RobotResult | None = None, **kwargs: object) -> None:
    """The runner's :data:`run_completed`: schedule the row's online evals (logged, never raised)."""
    if row is None:
        return
    try:
        schedule(row)
    except Exception:
        logger.exception("robotlab: the online evals of run %s could not be scheduled", getattr(row, "pk", None))


def connect_signals() -> None:
    """Listen to completed runs, and register the Celery task where Celery is loaded (the app's ``ready()`` calls it).

    A Celery worker has loaded Celery before Django's set up, so its workers know the task; a web process that did
    not load Celery does not pay for importing it (the task is imported when a run is first sent to it).
    """
    run_completed.connect(_on_run_completed, dispatch_uid="robotlab_online_evals")
    if "celery" in sys.modules:
        from robotlab_django.evals import online_task  # noqa: F401  (registers score_online_run)


def join(timeout: float | None = None) -> bool:
    """Wait for the background scoring threads started so far; ``True`` when all of them finished in time."""
    with _threads_lock:
        pending = list(_threads)
    for worker in pending:
        worker.join(timeout)
    return not any(worker.is_alive() for worker in pending)
