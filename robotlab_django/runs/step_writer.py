"""The thread that stores a run's checkpoints (:mod:`robotlab_django.runs.checkpoints`), one per process.

A step is stored the moment it completes, committed before the run goes on, in a thread of its own: the run's
own thread may be inside a transaction or waiting for its next batch of events. That thread used to be one of
asyncio's pool threads, which had to open a database connection for every step and close it after (a pool thread
must keep none); opening it cost more CPU than the step's write. :func:`submit` hands the write to one thread
that keeps its connection while steps come, and closes it once none has come for :data:`IDLE` seconds (or when a
write failed: the next one connects anew). Writes from every run of the process queue there, each a single
short insert.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

from django.db import connections

__all__ = ["IDLE", "submit"]

T = TypeVar("T")

#: Seconds without a step after which the writer closes its database connections.
IDLE = 5.0

_jobs: queue.SimpleQueue[tuple[Callable[[], object], Future[object]]] = queue.SimpleQueue()
_lock = threading.Lock()
_owner = {"pid": 0}  # the process whose writer thread runs (a forked child starts its own)


def submit(write: Callable[[], T]) -> Future[T]:
    """Run ``write`` (a step's database write) on the writer thread; its future."""
    future: Future[T] = Future()
    with _lock:
        if _owner["pid"] != os.getpid():
            _owner["pid"] = os.getpid()
            threading.Thread(target=_serve, name="robotlab-steps", daemon=True).start()
        _jobs.put((write, future))  # type: ignore[arg-type]  # a Future[T] is resolved with what write returns
    return future


def _serve() -> None:
    """Run the writes as they come; close the connections after :data:`IDLE` seconds without one."""
    idle: float | None = IDLE
    while True:
        try:
            write, future = _jobs.get(timeout=idle)
        except queue.Empty:
            connections.close_all()
            idle = None  # nothing to close until the next write
            continue
        idle = IDLE
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(write())
        except BaseException as exc:  # the write's own error, for its run to see
            connections.close_all()  # a broken connection is not kept
            future.set_exception(exc)
