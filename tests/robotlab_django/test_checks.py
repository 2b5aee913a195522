"""System checks: one test per id, and ``manage.py check`` reporting them."""

from __future__ import annotations

import types
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.urls import include, path

from robotlab_django import checks


def _ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def test_the_test_settings_are_valid() -> None:
    assert checks.check_settings() == []
    assert checks.check_llm_available() == []


def test_e001_robotlab_must_be_a_dict(settings: Any) -> None:
    settings.ROBOTLAB = "openai/gpt-4o-mini"
    messages = checks.check_settings()
    assert _ids(messages) == ["robotlab.E001"]
    assert "must be a dict, not str" in messages[0].msg


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("EXECUTOR", "celery-ish", "choose one of"),
    ("MAX_MESSAGE_LENGTH", 0, "greater than 0"),
    ("MAX_MESSAGE_LENGTH", "10", "must be int"),
    ("AUTODISCOVER", "yes", "must be bool"),
    ("ADMIN_USAGE_DAYS", True, "must be int"),
    ("LLM_MAX_RETRIES", -1, "0 or more"),
    ("ROBOT_MODULES", ["robots", "not a module"], "module names"),
    ("ROBOTS", {"x": 3}, "dotted paths"),
    ("THREAD_MODEL", None, "must not be None"),
    ("REQUEST_TIMEOUT", -5, "greater than 0"),
])
def test_e002_invalid_values(settings: Any, key: str, value: Any, fragment: str) -> None:
    settings.ROBOTLAB = {key: value}
    messages = checks.check_settings()
    assert _ids(messages) == ["robotlab.E002"]
    assert key in messages[0].msg and fragment in messages[0].msg


@pytest.mark.parametrize("robotlab", [
    {"LLM": "robotlab.nowhere.FakeThing"},
    {"ROBOTS": {"ghost": "tests.robotlab_django.nowhere.build"}},
    {"RESULT_MODEL": "robotlab.Nope"},
    {"EVENT_MODEL": "not-a-model-label"},
    {"STEP_MODEL": "robotlab.Nope"},
])
def test_e003_unresolvable_paths_and_models(settings: Any, robotlab: dict[str, Any]) -> None:
    settings.ROBOTLAB = robotlab
    assert _ids(checks.check_settings()) == ["robotlab.E003"]


def test_e004_secrets_are_refused(settings: Any) -> None:
    settings.ROBOTLAB = {"OPENAI_API_KEY": "sk-not-real", "SECRET": "x"}
    messages = checks.check_settings()
    assert _ids(messages) == ["robotlab.E004", "robotlab.E004"]
    assert "sk-not-real" not in " ".join(message.msg for message in messages)


def test_w001_unknown_key_suggests_the_closest(settings: Any) -> None:
    settings.ROBOTLAB = {"DEFAULT_MODLE": "x", "COMPLETELY_ELSE": 1}
    messages = checks.check_settings()
    assert _ids(messages) == ["robotlab.W001", "robotlab.W001"]
    assert messages[0].hint == "Did you mean 'DEFAULT_MODEL'?"
    assert "Known keys" in messages[1].hint


class _FakeConfig:
    def __init__(self, model: str | None) -> None:
        self.model = model

    def default_model(self) -> str | None:
        return self.model


def test_w002_no_llm_configured(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import robotlab.config

    settings.ROBOTLAB = {}
    monkeypatch.setattr(robotlab.config, "get_config", lambda: _FakeConfig(None))
    messages = checks.check_llm_available()
    assert _ids(messages) == ["robotlab.W002"]
    assert "robotlab.testing.DemoLLM" in messages[0].hint
    monkeypatch.setattr(robotlab.config, "get_config", lambda: _FakeConfig("openai/gpt-4o-mini"))
    assert checks.check_llm_available() == []
    settings.ROBOTLAB = {"DEFAULT_MODEL": "ollama/llama3"}
    monkeypatch.setattr(robotlab.config, "get_config", lambda: _FakeConfig(None))
    assert checks.check_llm_available() == []


def test_manage_py_check_reports_an_invalid_setting(settings: Any) -> None:
    settings.ROBOTLAB = {"EXECUTOR": "nope"}
    with pytest.raises(SystemCheckError, match=r"robotlab\.E002.*EXECUTOR"):
        call_command("check")


def test_manage_py_check_passes_with_warnings_only(settings: Any, capsys: pytest.CaptureFixture[str]) -> None:
    settings.ROBOTLAB = {"LLM": "robotlab.testing.DemoLLM", "TYPO_SETTING": 1}
    call_command("check")
    assert "robotlab.W001" in capsys.readouterr().err


def _urlconf(*patterns: Any) -> types.ModuleType:
    module = types.ModuleType("robotlab_check_urls")
    module.urlpatterns = list(patterns)  # type: ignore[attr-defined]
    return module


CHAT = path("chat/", include("robotlab_django.urls"))


def test_w003_chat_pages_without_a_channel_layer(settings: Any) -> None:
    """Issue 17 (4): the socket connects but nothing streams; the check says what to add."""
    settings.ROOT_URLCONF = _urlconf(CHAT)
    del settings.CHANNEL_LAYERS
    messages = checks.check_channel_layer()
    assert _ids(messages) == ["robotlab.W003"]
    assert "InMemoryChannelLayer" in messages[0].hint
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    assert checks.check_channel_layer() == []
    del settings.CHANNEL_LAYERS
    settings.ROOT_URLCONF = _urlconf()  # no chat pages: the layer is not needed
    assert checks.check_channel_layer() == []


def test_w004_login_url_that_is_no_page(settings: Any) -> None:
    """Issue 17 (5): a startproject site has no /accounts/login/; the check names the one-line fix."""
    settings.ROOT_URLCONF = _urlconf(CHAT)
    settings.LOGIN_URL = "/accounts/login/"
    messages = checks.check_login_url()
    assert _ids(messages) == ["robotlab.W004"]
    assert 'include("django.contrib.auth.urls")' in messages[0].hint
    settings.ROOT_URLCONF = _urlconf(CHAT, path("accounts/", include("django.contrib.auth.urls")))
    assert checks.check_login_url() == []
    settings.LOGIN_URL = "login"  # a URL name resolves too
    assert checks.check_login_url() == []
    settings.LOGIN_URL = "nowhere"
    assert _ids(checks.check_login_url()) == ["robotlab.W004"]
    settings.ROBOTLAB_CHAT_LOGIN_REQUIRED = False
    assert checks.check_login_url() == []


def test_the_shipped_login_page_serves_the_auth_urls(settings: Any, client: Any, db: Any) -> None:
    """Issue 17 (5): the one-line include works without the project writing a login template."""
    settings.ROOT_URLCONF = _urlconf(CHAT, path("accounts/", include("django.contrib.auth.urls")))
    page = client.get("/accounts/login/?next=/chat/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="rl-login"' in html and 'action="/accounts/login/"' in html and 'value="/chat/"' in html
    assert client.get("/chat/").url.startswith("/accounts/login/")
