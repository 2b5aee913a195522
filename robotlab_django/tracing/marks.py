"""Which run a span belongs to: the result row the app is executing in the current context.

The app marks the context of each run it executes (:func:`marked`, through :func:`robotlab_django.tracing.runs.traced`
and the Celery job's :func:`robotlab_django.tracing.propagation.job`); the span processor
(:class:`robotlab_django.tracing.processor.RunSpanProcessor`) keeps the spans started under a mark, and only those:
spans of anything else the process does (a request, a project's own robot outside the app) are not stored.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["RunMark", "current", "marked"]


@dataclass(frozen=True)
class RunMark:
    """The run a span belongs to: its result row's primary key, and the worker (host and pid) executing it."""

    result_id: Any
    worker: str = ""
    worker_pid: int | None = None


_current: contextvars.ContextVar[RunMark | None] = contextvars.ContextVar("robotlab_django_run_mark", default=None)


def current() -> RunMark | None:
    """The mark of the run executing in this context (``None`` outside the app's runs)."""
    return _current.get()


@contextmanager
def marked(mark: RunMark) -> Iterator[RunMark]:
    """Mark the spans started in the block (and in the tasks and threads it starts with its context) as ``mark``'s."""
    token = _current.set(mark)
    try:
        yield mark
    finally:
        _current.reset(token)
