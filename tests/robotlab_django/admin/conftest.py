"""Fixtures of the admin tests: the tracing tests' span recorder and span table (a run's trace, kept)."""

from __future__ import annotations

from tests.robotlab_django.tracing.conftest import kept, spans

__all__ = ["kept", "spans"]
