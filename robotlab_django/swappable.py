"""The project's models, typed: the thread, result, event, step and span models that ``ROBOTLAB`` names.

``ROBOTLAB["THREAD_MODEL"]`` and its siblings let a project use its own subclasses of the abstract
models. :mod:`robotlab_django.conf` looks them up without importing any model (it is the app's lowest
layer); the functions here give the same classes typed as the app's own models, for code that queries
them: a project's models subclass the same abstract bases and add the same foreign keys (``thread``,
``result``), so they answer the same queries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from robotlab_django.conf import app_settings

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult, RunEvent, RunSpan, RunStep, Thread

__all__ = ["event_model", "result_model", "span_model", "step_model", "thread_model"]


def thread_model() -> type[Thread]:
    """The thread model (``ROBOTLAB["THREAD_MODEL"]``)."""
    return cast("type[Thread]", app_settings.thread_model())


def result_model() -> type[RobotResult]:
    """The result model (``ROBOTLAB["RESULT_MODEL"]``)."""
    return cast("type[RobotResult]", app_settings.result_model())


def event_model() -> type[RunEvent]:
    """The stream event model (``ROBOTLAB["EVENT_MODEL"]``)."""
    return cast("type[RunEvent]", app_settings.event_model())


def step_model() -> type[RunStep]:
    """The run step model (``ROBOTLAB["STEP_MODEL"]``)."""
    return cast("type[RunStep]", app_settings.step_model())


def span_model() -> type[RunSpan]:
    """The span model (``ROBOTLAB["SPAN_MODEL"]``)."""
    return cast("type[RunSpan]", app_settings.span_model())
