"""The runs the app executes, traced: their spans kept in the span table while ``ROBOTLAB["TRACES"]`` is on.

The executor's paths call :func:`traced` around each run they execute (a robot run or a network turn in one
process: :func:`robotlab_django.runs.runner.aexecute`; a job of a distributed turn:
:func:`robotlab_django.networks.distributed.aexecute`). The first call installs the span processor
(:func:`robotlab_django.tracing.processor.install`); every call marks the run's context, so the spans the core
starts inside it (``invoke_agent``, ``chat``, ``execute_tool``, ``invoke_workflow``) are stored on the row.
Nothing is kept when the setting is off, when ``opentelemetry-sdk`` is not installed, when the project's tracer
provider is not the SDK's, or when ``SPAN_MODEL`` does not point at ``RESULT_MODEL``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from django.core.exceptions import FieldDoesNotExist

from robotlab_django import swappable
from robotlab_django.conf import app_settings
from robotlab_django.tracing.marks import RunMark, marked

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult
    from robotlab_django.tracing.processor import RunSpanProcessor

__all__ = ["keeping", "mark_of", "traced"]

logger = logging.getLogger("robotlab_django")

_told: set[str] = set()


def _tell_once(key: str, message: str, *args: object) -> None:
    if key not in _told:
        _told.add(key)
        logger.warning(message, *args)


def _fits() -> bool:
    """Whether ``SPAN_MODEL`` is an installed model whose ``result`` points at ``RESULT_MODEL``."""
    try:
        return bool(swappable.span_model()._meta.get_field("result").related_model is swappable.result_model())
    except (LookupError, ValueError, FieldDoesNotExist):  # check robotlab.E003 reports a model that is not there
        return False


def keeping() -> RunSpanProcessor | None:
    """The span processor when the spans of runs are kept here and now (installed on first use), else ``None``.

    Never raises: tracing does not fail a run.
    """
    if not app_settings.TRACES:
        return None
    if not _fits():
        _tell_once("model", "robotlab: ROBOTLAB['SPAN_MODEL'] (%s) is not a model whose result points at RESULT_MODEL "
                   "(%s); the spans of runs are not kept", app_settings.SPAN_MODEL, app_settings.RESULT_MODEL)
        return None
    try:
        from robotlab_django.tracing import processor
    except ImportError:
        _tell_once("sdk", "robotlab: ROBOTLAB['TRACES'] is on but opentelemetry-sdk is not installed: the spans of "
                   "runs are not kept (pip install opentelemetry-sdk, or set TRACES to False)")
        return None
    try:
        return processor.install()
    except Exception:
        logger.exception("robotlab: the span processor could not be installed; the spans of runs are not kept")
        return None


def mark_of(row: RobotResult) -> RunMark:
    """The mark of ``row``'s run: its primary key and the worker that claimed it."""
    return RunMark(row.pk, str(getattr(row, "worker", "") or ""), getattr(row, "worker_pid", None))


@contextmanager
def traced(row: RobotResult) -> Iterator[None]:
    """Keep the spans started in the block as ``row``'s (when they are kept at all: :func:`keeping`)."""
    if keeping() is None:
        yield
        return
    with marked(mark_of(row)):
        yield
