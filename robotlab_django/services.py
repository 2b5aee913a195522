"""Running robots on threads and persisting what they did: the app's service functions, in one place.

Views, commands, jobs and the admin call these; each lives in the module of its concept:

* threads and rows (:mod:`robotlab_django.runs.records`): :func:`get_thread`, :func:`append_result`,
  :func:`start_run` (append a ``queued`` run; nothing runs yet);
* robots (:mod:`robotlab_django.runs.runnables`): :func:`build_robot`, :func:`restore_robot`;
* executing (:mod:`robotlab_django.runs.runner`): :func:`execute_run` claims a queued row, runs its robot or
  network with the thread's history and stores what it did; :func:`run_robot` queues and executes at
  once; :func:`aexecute_run` and :func:`arun_robot` are the async forms (the sync ones are thin
  wrappers over them);
* dispatching (:mod:`robotlab_django.runs.executor`): :func:`rerun_last_user_message`.

``run_robot("session-1", "support", "Where is my order?")`` creates the thread if needed, restores its
history into a fresh ``support`` robot, runs it and returns the stored
:class:`~robotlab_django.models.RobotResult` row (``reply``, tokens, cost, ...).
"""

from __future__ import annotations

from robotlab_django.runs.executor import NothingToRerunError, rerun_last_user_message
from robotlab_django.runs.records import APPEND_ATTEMPTS, append_result, get_thread, start_run
from robotlab_django.runs.runnables import build_robot, restore_robot
from robotlab_django.runs.runner import RunFailedError, aexecute_run, arun_robot, execute_run, run_robot

__all__ = [
    "APPEND_ATTEMPTS",
    "NothingToRerunError",
    "RunFailedError",
    "aexecute_run",
    "append_result",
    "arun_robot",
    "build_robot",
    "execute_run",
    "get_thread",
    "rerun_last_user_message",
    "restore_robot",
    "run_robot",
    "start_run",
]
