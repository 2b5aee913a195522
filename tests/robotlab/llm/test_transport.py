"""The transport choice: where the direct client sends a model, when litellm is kept, and the run's record."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import robotlab
from robotlab.config import reload_config
from robotlab.errors import ConfigurationError
from robotlab.llm import AutoLLM, LLMClient, LLMRequest, load_litellm
from robotlab.llm.direct import OpenAICompatibleLLM
from robotlab.llm.quirks import quirks_for
from robotlab.llm.transport import PROVIDERS, Endpoint, choose_transport, litellm_customised, resolve_endpoint
from robotlab.robot import build
from robotlab.testing import allow_real_requests
from robotlab.testing.server import FakeLLMServer, reply

_VARIABLES = [name for spec in PROVIDERS.values() for name in (*spec.base_variables, *spec.key_variables)]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


@pytest.mark.parametrize(
    ("model", "variables", "expected"),
    [
        ("openai/gpt-4o-mini", {}, ("openai", "gpt-4o-mini", "https://api.openai.com/v1", None)),
        ("gpt-4o", {"OPENAI_API_KEY": "k", "OPENAI_API_BASE": "http://b/v1"}, ("openai", "gpt-4o", "http://b/v1", "k")),
        ("openai/x", {"OPENAI_BASE_URL": "http://a/v1", "OPENAI_API_BASE": "http://b/v1"},
         ("openai", "x", "http://a/v1", None)),
        ("openrouter/openai/gpt-4o-mini", {"OR_API_KEY": "or"},
         ("openrouter", "openai/gpt-4o-mini", "https://openrouter.ai/api/v1", "or")),
        ("groq/llama-3.1-8b-instant", {"GROQ_API_KEY": "g"},
         ("groq", "llama-3.1-8b-instant", "https://api.groq.com/openai/v1", "g")),
        ("deepseek/deepseek-chat", {"DEEPSEEK_API_BASE": "http://d/v1"},
         ("deepseek", "deepseek-chat", "http://d/v1", None)),
        ("xai/grok-3-mini", {"XAI_API_KEY": "x"}, ("xai", "grok-3-mini", "https://api.x.ai/v1", "x")),
        ("together_ai/meta-llama/Llama-3-8b", {"TOGETHERAI_API_KEY": "t"},
         ("together_ai", "meta-llama/Llama-3-8b", "https://api.together.ai/v1", "t")),
        ("hosted_vllm/qwen", {"HOSTED_VLLM_API_BASE": "http://vllm:8000/v1"},
         ("hosted_vllm", "qwen", "http://vllm:8000/v1", None)),
    ],
)
def test_the_direct_endpoint_is_where_litellm_sends_the_model(
    monkeypatch: pytest.MonkeyPatch, model: str, variables: dict[str, str], expected: tuple[Any, ...]
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    endpoint = resolve_endpoint(model)
    assert endpoint is not None
    assert (endpoint.provider, endpoint.model, endpoint.api_base, endpoint.api_key) == expected


def test_arguments_win_over_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROQ_API_BASE", "http://env/v1")
    monkeypatch.setenv("GROQ_API_KEY", "env")
    endpoint = resolve_endpoint("groq/m", "http://arg/v1", "arg")
    assert endpoint is not None and (endpoint.api_base, endpoint.api_key) == ("http://arg/v1", "arg")


@pytest.mark.parametrize(
    ("model", "api_base", "expected"),
    [
        ("openai/gpt-4o-mini", None, "direct"),
        ("llama3", "http://localhost:11434/v1", "direct"),  # Ollama's OpenAI endpoint
        ("anthropic/claude-sonnet-4-20250514", None, "litellm"),
        ("anthropic/claude-sonnet-4-20250514", "http://proxy/v1", "litellm"),
        ("ollama/llama3", None, "litellm"),
        ("hosted_vllm/qwen", None, "litellm"),  # no base URL anywhere: litellm raises its own error
        ("my-local-model", None, "litellm"),
    ],
)
def test_auto_chooses_per_model(model: str, api_base: str | None, expected: str) -> None:
    assert choose_transport(model, "auto", api_base) == expected
    assert choose_transport(model, "litellm", api_base) == "litellm"


def test_bad_settings_say_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="llm_transport must be one of 'auto', 'litellm', 'direct', got 'x'"):
        choose_transport("openai/gpt-4o", "x")
    with pytest.raises(ConfigurationError, match="llm_transport='direct' cannot reach 'anthropic/claude'"):
        choose_transport("anthropic/claude", "direct")
    with pytest.raises(ConfigurationError, match="llm_transport"):
        robotlab.configure(llm_transport="fast")


def test_configured_litellm_callbacks_keep_auto_on_litellm(server: FakeLLMServer) -> None:
    litellm = load_litellm()
    from litellm.integrations.custom_logger import CustomLogger

    logged = asyncio.Event()

    class Logger(CustomLogger):  # type: ignore[misc]
        async def async_log_success_event(self, *args: Any, **kwargs: Any) -> None:
            logged.set()

    llm = AutoLLM(transport="auto", api_base=server.base_url, api_key="sk-fake")
    assert llm.route("openai/gpt-4o-mini")[0] == "direct"
    logger = Logger()
    litellm.callbacks.append(logger)
    try:
        assert litellm_customised()
        server.script(reply("logged"))

        async def call() -> str | None:
            response = await llm.complete(LLMRequest(model="openai/gpt-4o-mini", messages=[]))
            await asyncio.wait_for(logged.wait(), 10)
            return response.transport

        assert asyncio.run(call()) == "litellm"
    finally:  # litellm copies a callback into its internal lists: take it out of all of them
        for name in ("callbacks", "_async_success_callback", "_async_failure_callback", "success_callback",
                     "failure_callback", "input_callback", "_async_input_callback", "service_callback"):
            target = getattr(litellm, name, [])
            while logger in target:
                target.remove(logger)
    assert not litellm_customised()


def test_the_default_robot_records_its_transport(server: FakeLLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)  # where litellm would send it too
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake")
    server.script(reply("one"), reply("two"))
    robot = build(name="r", model="openai/gpt-4o-mini")
    assert isinstance(robot.llm, AutoLLM)
    assert robot.run("hi").transport == "direct"
    try:
        robotlab.configure(llm_transport="litellm")
        robot = build(name="r", model="openai/gpt-4o-mini")
        with allow_real_requests():  # the guard cannot see litellm's variables; they point at the fake server
            result = robot.run("hi")
        assert (result.reply, result.transport) == ("two", "litellm")
        assert result.export()["transport"] == "litellm"
    finally:
        reload_config()
    assert [r["model"] for r in server.requests] == ["gpt-4o-mini", "gpt-4o-mini"]


def test_the_direct_route_uses_litellm_parameter_mapping(server: FakeLLMServer) -> None:
    llm = AutoLLM(transport="direct", api_base=server.base_url, api_key="sk-fake")
    name, client = llm.route("openai/o3-mini")
    assert name == "direct" and isinstance(client, OpenAICompatibleLLM)
    server.script(reply("ok"))
    asyncio.run(llm.complete(LLMRequest(model="openai/o3-mini", messages=[], params={"max_tokens": 9,
                                                                                     "temperature": 0.2})))
    sent = server.requests[0]
    assert sent["max_completion_tokens"] == 9 and "max_tokens" not in sent and "temperature" not in sent
    assert quirks_for("openai", "o3-mini") is quirks_for("openai", "o3-mini")  # learned once


def test_the_litellm_route_is_the_litellm_client(server: FakeLLMServer) -> None:
    llm = AutoLLM(transport="litellm", api_base=server.base_url, timeout=5, num_retries=2)
    name, client = llm.route("openai/gpt-4o-mini")
    assert name == "litellm" and isinstance(client, LLMClient)
    assert (client.api_base, client.timeout, client.num_retries) == (server.base_url, 5, 2)


def test_a_hosted_model_without_its_key_is_a_configuration_error_before_any_request() -> None:
    """Issue 17 (7): no OPENAI_API_KEY names the variable instead of ending in the provider's HTTP 500."""
    request = LLMRequest(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(ConfigurationError, match="set the OPENAI_API_KEY environment variable") as caught:
        asyncio.run(AutoLLM(transport="auto").complete(request))
    assert caught.value.setting == "OPENAI_API_KEY"


def test_a_local_server_needs_no_key(server: FakeLLMServer) -> None:
    server.script(reply("local"))
    request = LLMRequest(model="openai/local", messages=[{"role": "user", "content": "hi"}])
    answer = asyncio.run(AutoLLM(transport="direct", api_base=server.base_url).complete(request))
    assert answer.content == "local"


@pytest.mark.parametrize("transport", ["auto", "direct", "litellm"])
def test_a_local_servers_own_model_id_goes_to_api_base_as_it_is(server: FakeLLMServer, transport: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 26 (13): vLLM lists ``Qwen/Qwen2.5-7B-Instruct``; with api_base it failed with litellm's
    "LLM Provider NOT provided". An id whose prefix is no litellm provider is the server's own: OpenAI-compatible
    at api_base, sent as written, and no provider's key goes with it."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-a-local-server")
    server.script(reply("local"))
    request = LLMRequest(model="Qwen/Qwen2.5-7B-Instruct", messages=[{"role": "user", "content": "hi"}])
    answer = asyncio.run(AutoLLM(transport=transport, api_base=server.base_url).complete(request))
    assert answer.content == "local"
    assert server.requests[0]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert answer.transport == ("litellm" if transport == "litellm" else "direct")


def test_a_provider_prefix_keeps_its_provider_under_api_base() -> None:
    assert resolve_endpoint("Qwen/Qwen2.5-7B-Instruct", "http://vllm:8000/v1") == Endpoint(
        "hosted_vllm", "Qwen/Qwen2.5-7B-Instruct", "http://vllm:8000/v1", None)
    assert resolve_endpoint("Qwen/Qwen2.5-7B-Instruct") is None  # no endpoint: litellm says what is missing
    assert resolve_endpoint("anthropic/claude-sonnet-4-20250514", "http://proxy/v1") is None  # litellm translates
    assert choose_transport("meta-llama/Llama-3.1-8B-Instruct", "auto", "http://vllm:8000/v1") == "direct"


def test_an_unplaced_bare_id_at_api_base_is_the_servers_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-for-a-local-server")
    assert resolve_endpoint("llama3.2", "http://127.0.0.1:11434/v1") == Endpoint(
        "hosted_vllm", "llama3.2", "http://127.0.0.1:11434/v1", None)  # Ollama's id: no OpenAI key goes there
    endpoint = resolve_endpoint("gpt-4o", "http://proxy/v1")  # OpenAI's own name through a proxy keeps OpenAI's key
    assert endpoint is not None and (endpoint.provider, endpoint.api_key) == ("openai", "sk-not-for-a-local-server")
