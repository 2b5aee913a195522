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
    ("GROUP_PREFIX", "two words", "channels' rule"),
    ("GROUP_PREFIX", "x" * 61, "1 to 60"),
    ("MAX_ATTACHMENTS", 0, "greater than 0"),
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


@pytest.mark.parametrize(("model", "api_base", "expected"), [
    ("Qwen/Qwen2.5-7B-Instruct", None, ["robotlab.W008"]),  # no endpoint: "LLM Provider NOT provided" at each run
    ("Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:8000/v1", []),  # the server's own id, sent to it as written
    ("hosted_vllm/Qwen/Qwen2.5-7B-Instruct", "http://127.0.0.1:8000/v1", []),
    ("anthropic/claude-sonnet-4-20250514", "http://127.0.0.1:8000/v1", ["robotlab.W008"]),  # Anthropic's API there
    ("anthropic/claude-sonnet-4-20250514", None, []),
    ("openai/gpt-4o-mini", None, []),
])
def test_w008_a_model_id_that_reaches_no_server(settings: Any, model: str, api_base: str | None,
                                                expected: list[str]) -> None:
    """Issue 26 (13): a local model's own id with no API_BASE failed at every run and ``check`` said nothing."""
    settings.ROBOTLAB = {"DEFAULT_MODEL": model, **({"API_BASE": api_base} if api_base else {})}
    messages = checks.check_model_endpoint()
    assert _ids(messages) == expected
    if expected and api_base is None:
        assert "API_BASE" in messages[0].hint and "local-models" in messages[0].hint
    if expected and api_base:
        assert f"hosted_vllm/{model}" in messages[0].hint


@pytest.mark.parametrize(("url", "transport", "warned"), [
    ("redis://127.0.0.1:6379/0", None, True),
    ("rediss://cache.example:6380/0", None, True),
    ("redis://a:6379/0;redis://b:6379/0", "redis", True),
    (["redis://127.0.0.1:6379/0"], None, True),
    ("redis://127.0.0.1:6379/0", "robotlab_django.workers.redis_broker:Transport", False),
    ("redis://127.0.0.1:6379/0", "robotlab_django.workers.redis_broker.Transport", False),
    ("amqp://guest@localhost//", None, False),
    ("memory://", None, False),
    ("sentinel://127.0.0.1:26379", None, False),
    (None, None, False),
])
def test_w009_a_redis_broker_on_kombus_own_transport(url: object, transport: object, warned: bool) -> None:
    found = checks.broker_transport_warnings(url, transport)
    assert [message.id for message in found] == (["robotlab.W009"] if warned else [])
    assert not found or "robotlab_django.workers.redis_broker:Transport" in str(found[0].hint)


def test_w009_is_quiet_for_the_tests_celery_app() -> None:
    from tests.robotlab_django.celery_app import app

    assert app.conf.broker_url.startswith("redis://")
    assert checks.broker_transport_warnings(app.conf.broker_url, app.conf.broker_transport) == []
    with app.connection_for_write() as connection:  # what the check reads is what the app connects with
        assert type(connection.transport).__module__ == "robotlab_django.workers.redis_broker"


def test_w009_only_with_the_celery_executor(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread"}
    assert checks.check_broker_transport() == []
