"""docs/django/local-models.md, run as written (issue 26, item 13).

A local server's own model id (``Qwen/Qwen2.5-7B-Instruct``, what vLLM lists) with ``API_BASE`` failed with
litellm's "LLM Provider NOT provided", and ``manage.py check`` said nothing. The page's settings block is taken
from the page; only its ``API_BASE`` is pointed at the fake OpenAI-compatible server, which stands in for vLLM.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from robotlab.testing import FakeLLMServer
from robotlab_django import checks, services
from robotlab_django.models import Status

PAGE = Path(__file__).resolve().parents[2] / "docs" / "django" / "local-models.md"
_PYTHON = re.compile(r"^```python[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[str]:
    return _PYTHON.findall(PAGE.read_text())


def _page_settings() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(_blocks()[0], namespace)  # the page's settings.py block
    settings: dict[str, Any] = namespace["ROBOTLAB"]
    return settings


def test_the_page_names_a_servers_own_id() -> None:
    page = _page_settings()
    assert page["DEFAULT_MODEL"] == "Qwen/Qwen2.5-7B-Instruct" and page["API_BASE"].endswith("/v1")


def test_manage_py_check_accepts_the_pages_settings_and_warns_without_api_base(settings: Any) -> None:
    settings.ROBOTLAB = _page_settings()
    assert checks.check_model_endpoint() == []
    settings.ROBOTLAB = {key: value for key, value in _page_settings().items() if key != "API_BASE"}
    assert [message.id for message in checks.check_model_endpoint()] == ["robotlab.W008"]


@pytest.mark.django_db
@pytest.mark.parametrize("transport", [None, "litellm"])
def test_a_robot_runs_on_the_pages_settings(settings: Any, transport: str | None) -> None:
    with FakeLLMServer("Hello from the local model.") as server:
        # no spans kept (as in the tests' settings): the SDK's thread would write them after this test, into the next
        settings.ROBOTLAB = {**_page_settings(), "API_BASE": server.base_url, "TRACES": False,
                             **({"LLM_TRANSPORT": transport} if transport else {})}
        row = services.run_robot("local-model", "echo", "Hi")
        assert (row.status, row.reply) == (Status.COMPLETED, "Hello from the local model.")
        assert [request["model"] for request in server.requests] == ["Qwen/Qwen2.5-7B-Instruct"]


def test_the_core_block_runs() -> None:
    exec(_blocks()[1], {})
