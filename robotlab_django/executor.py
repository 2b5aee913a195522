"""Executing queued runs in this process (``ROBOTLAB["EXECUTOR"]``), for development without a broker.

* ``"thread"`` (the default): once the current transaction commits, the run executes in a
  background thread of this process, which closes its database connections when done.
* ``"sync"``: the run executes at once, in the caller's thread (tests, scripts).
* ``"celery"``: once the transaction commits, :func:`robotlab_django.tasks.run_robot` is sent to
  a Celery worker (see :mod:`robotlab_django.tasks`).

Only the row's primary key crosses to the executor, never model instances or secrets, so a
queue-based executor can take the same calls.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections, transaction

from .conf import app_settings

__all__ = ["EXECUTORS", "dispatch", "join"]

logger = logging.getLogger("robotlab_django")

#: The executors this module provides.
EXECUTORS = ("thread", "sync", "celery")

_threads: set[threading.Thread] = set()
_threads_lock = threading.Lock()


def _execute_in_background(pk: Any) -> None:
    from .services import execute_run

    close_old_connections()
    try:
        execute_run(pk, raise_errors=False)
    except Exception:  # the row may be gone, or the database down; never kill the process
        logger.exception("robotlab: background run %s failed", pk)
    finally:
        connections.close_all()
        with _threads_lock:
            _threads.discard(threading.current_thread())


def _start_thread(pk: Any) -> None:
    worker = threading.Thread(target=_execute_in_background, args=(pk,), name=f"robotlab-run-{pk}", daemon=True)
    with _threads_lock:
        _threads.add(worker)
    worker.start()


def dispatch(result: Any, *, queue: str | None = None) -> None:
    """Execute the queued ``result`` (a row or its primary key) with the configured executor.

    ``queue`` is the Celery queue (``ROBOTLAB["TASK_QUEUE"]`` when ``None``); other executors ignore it.

    Raises:
        ImproperlyConfigured: ``ROBOTLAB["EXECUTOR"]`` names no executor of this module.
    """
    pk = getattr(result, "pk", result)
    mode = app_settings.EXECUTOR
    if mode == "sync":
        from .services import execute_run

        execute_run(pk, raise_errors=False)
    elif mode == "thread":
        transaction.on_commit(lambda: _start_thread(pk), robust=True)
    elif mode == "celery":
        from .tasks import enqueue

        enqueue(result, queue=queue)
    else:
        raise ImproperlyConfigured(f"ROBOTLAB['EXECUTOR'] is {mode!r}; choose one of: {', '.join(EXECUTORS)}.")


def join(timeout: float | None = None) -> bool:
    """Wait for the background runs started so far; ``True`` when all of them finished in time."""
    with _threads_lock:
        pending = list(_threads)
    for worker in pending:
        worker.join(timeout)
    return not any(worker.is_alive() for worker in pending)
