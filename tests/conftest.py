"""Hooks of the whole suite: Ctrl-C handling (tests/interrupt.py) and the run's Redis keys removed at its end."""

from __future__ import annotations

from typing import Any

from tests.interrupt import pytest_configure, pytest_unconfigure
from tests.run_keys import remove_run_keys

__all__ = ["pytest_configure", "pytest_sessionfinish", "pytest_unconfigure"]


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Remove the keys this run left on the shared Redis (all under its prefix), in every database."""
    from tests.robotlab_django import settings

    if settings.OWNS_RUN:
        remove_run_keys(settings.REDIS_PREFIX)
