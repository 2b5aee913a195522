"""ROBOTLAB["INSTRUMENT"] and ROBOT_LAB_INSTRUMENT: the core's spans of the app's runs on or off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.config import get_config, reload_config
from robotlab.testing import text
from robotlab_django import services
from robotlab_django.models import RunSpan
from robotlab_django.tracing.processor import RunSpanProcessor
from tests.robotlab.spans import Recorder

pytestmark = pytest.mark.django_db


@pytest.fixture
def quiet_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``ROBOT_LAB_INSTRUMENT=false``, read by a fresh core configuration; the configuration read again after."""
    monkeypatch.setenv("ROBOT_LAB_INSTRUMENT", "false")
    reload_config()
    try:
        yield
    finally:
        monkeypatch.delenv("ROBOT_LAB_INSTRUMENT")
        reload_config()


def test_instrument_false_turns_the_core_off_and_none_gives_it_back(kept: RunSpanProcessor, spans: Recorder,
                                                                    settings: Any, scripted_llm: Any) -> None:
    scripted_llm(text("Hi."), text("Hello again."))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "INSTRUMENT": False}
    assert get_config().instrument is False
    services.run_robot("s-1", "echo", "Hi")
    kept.force_flush()
    assert spans.spans() == [] and not RunSpan.objects.exists()

    settings.ROBOTLAB = {key: value for key, value in settings.ROBOTLAB.items() if key != "INSTRUMENT"}
    assert get_config().instrument is True
    row = services.run_robot("s-1", "echo", "Hi")
    kept.force_flush()
    assert spans.one("invoke_agent echo") and RunSpan.objects.filter(result=row).count() == 2


def test_the_environment_variable_turns_the_apps_runs_off(quiet_environment: None, kept: RunSpanProcessor,
                                                         spans: Recorder, settings: Any, scripted_llm: Any) -> None:
    scripted_llm(text("Hi."), text("Hello again."))
    assert get_config().instrument is False  # ROBOTLAB["INSTRUMENT"] is None: the core's own setting
    services.run_robot("s-1", "echo", "Hi")
    kept.force_flush()
    assert spans.spans() == [] and not RunSpan.objects.exists()

    settings.ROBOTLAB = {**settings.ROBOTLAB, "INSTRUMENT": True}  # the app's setting wins over the variable
    row = services.run_robot("s-1", "echo", "Hi")
    kept.force_flush()
    assert RunSpan.objects.filter(result=row).count() == 2
    settings.ROBOTLAB = {key: value for key, value in settings.ROBOTLAB.items() if key != "INSTRUMENT"}
    assert get_config().instrument is False
