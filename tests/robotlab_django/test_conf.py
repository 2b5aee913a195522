"""The settings object: defaults, fresh reads, resolved values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from robotlab_django.conf import SETTINGS, app_settings
from robotlab_django.models import RobotResult, RunEvent, Thread


def test_every_key_has_a_default_and_documentation() -> None:
    from robotlab_django.conf import BUDGET_DEFAULTS, BUDGET_LIMITS

    for key, spec in SETTINGS.items():
        assert key.isupper()
        assert len(spec.doc) > 20, key
        if key == "BUDGETS":  # read with every key filled in: no limits, the default reservation
            assert {**dict.fromkeys(BUDGET_LIMITS), **BUDGET_DEFAULTS} == app_settings.BUDGETS
            continue
        assert getattr(app_settings, key) == (tuple(spec.default) if key == "ROBOT_MODULES" else spec.default) \
            or key in {"EXECUTOR", "LLM"}  # the test settings set these two


def test_reads_are_fresh_under_override_settings() -> None:
    assert app_settings.TASK_QUEUE == "default"
    with override_settings(ROBOTLAB={"TASK_QUEUE": "ai", "DEFAULT_MODEL": "openai/gpt-4o-mini"}):
        assert app_settings.TASK_QUEUE == "ai"
        assert app_settings.DEFAULT_MODEL == "openai/gpt-4o-mini"
    assert app_settings.TASK_QUEUE == "default"


def test_missing_or_invalid_robotlab_setting_reads_as_defaults(settings: Any) -> None:
    del settings.ROBOTLAB
    assert app_settings.EXECUTOR == "thread"
    settings.ROBOTLAB = ["not", "a", "dict"]
    assert app_settings.user_settings == {}
    assert app_settings.MAX_MESSAGE_LENGTH == 32_000


def test_resolved_models_and_llm_factory(settings: Any) -> None:
    assert (app_settings.thread_model(), app_settings.result_model(), app_settings.event_model()) == (
        Thread, RobotResult, RunEvent)
    from robotlab.testing import DemoLLM

    settings.ROBOTLAB = {"LLM": "robotlab.testing.DemoLLM"}  # a dotted path resolves to what it names
    assert app_settings.llm_factory() is DemoLLM
    marker = object()
    settings.ROBOTLAB = {"LLM": lambda: marker}
    factory = app_settings.llm_factory()
    assert factory is not None and factory() is marker
    settings.ROBOTLAB = {}
    assert app_settings.llm_factory() is None


def test_llm_client_options_only_hold_what_is_set(settings: Any) -> None:
    settings.ROBOTLAB = {}
    assert app_settings.llm_client_options() == {}
    settings.ROBOTLAB = {"API_BASE": "http://127.0.0.1:4000/v1", "REQUEST_TIMEOUT": 5, "LLM_MAX_RETRIES": 0}
    assert app_settings.llm_client_options() == {"api_base": "http://127.0.0.1:4000/v1", "timeout": 5,
                                                 "num_retries": 0}


def test_project_root_is_base_dir_else_the_working_directory(settings: Any, tmp_path: Path) -> None:
    settings.BASE_DIR = tmp_path
    assert app_settings.project_root == tmp_path
    del settings.BASE_DIR
    assert app_settings.project_root == Path.cwd()


def test_unknown_key_lookup_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        app_settings.get("NOPE")
