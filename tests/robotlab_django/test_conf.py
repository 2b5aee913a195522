"""The settings object: defaults, fresh reads, resolved values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from robotlab_django.conf import SETTINGS, app_settings
from robotlab_django.models import RobotResult, RunEvent, Thread
from tests.robotlab_django.settings import TASK_QUEUE as RUN_QUEUE


def test_every_key_has_a_default_and_documentation() -> None:
    from robotlab_django.conf import BUDGET_DEFAULTS, BUDGET_LIMITS

    for key, spec in SETTINGS.items():
        assert key.isupper()
        assert len(spec.doc) > 20, key
        if key == "BUDGETS":  # read with every key filled in: no limits, the default reservation
            assert {**dict.fromkeys(BUDGET_LIMITS), **BUDGET_DEFAULTS} == app_settings.BUDGETS
            continue
        assert getattr(app_settings, key) == (tuple(spec.default) if key == "ROBOT_MODULES" else spec.default) \
            or key in {"EXECUTOR", "LLM", "TASK_QUEUE", "TRACES"}  # the test settings set these four
    with override_settings(ROBOTLAB={}):
        assert app_settings.TASK_QUEUE == SETTINGS["TASK_QUEUE"].default == "default"


def test_reads_are_fresh_under_override_settings() -> None:
    assert app_settings.TASK_QUEUE == RUN_QUEUE  # the test run's own queue (tests/robotlab_django/settings.py)
    with override_settings(ROBOTLAB={}):
        assert app_settings.TASK_QUEUE == "default"
    with override_settings(ROBOTLAB={"TASK_QUEUE": "ai", "DEFAULT_MODEL": "openai/gpt-4o-mini"}):
        assert app_settings.TASK_QUEUE == "ai"
        assert app_settings.DEFAULT_MODEL == "openai/gpt-4o-mini"
    assert app_settings.TASK_QUEUE == RUN_QUEUE


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


def _cost_map_setting_after_setup(**env: str) -> str:
    """``LITELLM_LOCAL_MODEL_COST_MAP`` in a fresh process once ``django.setup()`` has run (``<unset>`` if not set)."""
    import os
    import subprocess
    import sys

    base = {key: value for key, value in os.environ.items() if key != "LITELLM_LOCAL_MODEL_COST_MAP"}
    code = ("import os, django; django.setup(); "
            "print(os.environ.get('LITELLM_LOCAL_MODEL_COST_MAP', '<unset>'))")
    done = subprocess.run([sys.executable, "-c", code], env={
        **base, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", **env},
        capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_the_app_keeps_litellm_from_fetching_its_price_map_unless_the_project_says() -> None:
    # a worker child that imports litellm (a robot module, the first model call) must not wait on the network
    assert _cost_map_setting_after_setup() == "True"
    assert _cost_map_setting_after_setup(LITELLM_LOCAL_MODEL_COST_MAP="False") == "False"
