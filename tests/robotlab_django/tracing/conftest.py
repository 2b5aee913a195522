"""Fixtures of the tracing tests: the core's spans recorded (tests/robotlab/spans.py) and kept in the span table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.config import get_config
from robotlab_django.tracing import processor
from robotlab_django.tracing.processor import RunSpanProcessor
from tests.robotlab.spans import Recorder, recording


@pytest.fixture
def spans() -> Iterator[Recorder]:
    """The core's spans of the test (the SDK's in-memory exporter), with the core's settings restored after."""
    config = get_config()
    saved = (config.instrument, config.capture_content)
    with recording() as recorder:
        yield recorder
    config.instrument, config.capture_content = saved


@pytest.fixture
def kept(spans: Recorder, settings: Any, db: None) -> Iterator[RunSpanProcessor]:
    """``ROBOTLAB["TRACES"]`` on, and the app's span processor on the SDK provider; flushed before the test's rollback.

    The processor is made once per run (``_span_processor`` in tests/robotlab_django/conftest.py), batching for
    ever: a test sees its spans in the table after ``kept.force_flush()``, written in its own thread and transaction.
    """
    settings.ROBOTLAB = {**settings.ROBOTLAB, "TRACES": True}
    found = processor.installed()
    assert found is not None
    found.marks.clear()  # spans of earlier tests that kept theirs (a ROBOTLAB of their own), rolled back: not written
    found.force_flush()  # ... and out of the queue, so this test's table holds its own spans only
    try:
        yield found
    finally:
        found.force_flush()  # none of this test's spans is left for the next one
