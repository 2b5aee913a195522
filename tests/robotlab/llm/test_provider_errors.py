"""Provider failures as typed :class:`InferenceError` fields: kind, HTTP status, retry-after, provider, model.

Each kind the fake server can produce runs through both transports over real HTTP and must give the same
fields; the kinds only litellm's exception classes tell (a context window, a content policy) are checked on
exceptions of those class names.
"""

from __future__ import annotations

import pickle
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.errors import PROVIDER_ERROR_KINDS, InferenceError, ProviderErrorKind
from robotlab.llm import AutoLLM, LLMRequest
from robotlab.llm.guard import ERROR_KINDS, error_for, error_kind, provider_fields
from robotlab.streaming import failure_data
from robotlab.testing.server import FakeLLMServer, cut_stream, fault, reply, slow_first_byte

MODEL = "openai/gpt-4o-mini"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as running:
        yield running


def request() -> LLMRequest:
    return LLMRequest(model=MODEL, messages=[{"role": "user", "content": "hi"}])


async def failure(api_base: str, transport: str, *, stream: bool = False, **options: Any) -> InferenceError:
    llm = AutoLLM(transport=transport, api_base=api_base, api_key="sk-fake", num_retries=0, **options)
    with pytest.raises(InferenceError) as info:
        await llm.complete(request(), on_text=(lambda _: None) if stream else None)
    return info.value


def fields(error: InferenceError) -> tuple[Any, ...]:
    return error.kind, error.status_code, error.retry_after, error.provider, error.model


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "bad_request"), (401, "auth"), (402, "quota"), (403, "permission"), (404, "not_found"),
     (429, "rate_limit"), (500, "server"), (503, "server")],
)
@pytest.mark.parametrize("transport", ["litellm", "direct"])
async def test_each_http_failure_has_its_kind_and_status(server: FakeLLMServer, transport: str, status: int,
                                                         kind: ProviderErrorKind) -> None:
    server.script(fault(status, message="scripted failure"))
    error = await failure(server.base_url, transport)
    assert fields(error) == (kind, status, None, "openai", MODEL)
    assert f"(HTTP {status})" in str(error) and "scripted failure" in str(error)


@pytest.mark.parametrize("transport", ["litellm", "direct"])
async def test_a_rate_limit_carries_the_servers_retry_after(server: FakeLLMServer, transport: str) -> None:
    server.script(fault(429, retry_after=7))
    assert fields(await failure(server.base_url, transport)) == ("rate_limit", 429, 7.0, "openai", MODEL)


@pytest.mark.parametrize("transport", ["litellm", "direct"])
async def test_a_timeout(server: FakeLLMServer, transport: str) -> None:
    server.script(slow_first_byte(2.0, reply("late")))
    error = await failure(server.base_url, transport, timeout=0.3)
    assert (error.kind, error.status_code) == ("timeout", 408)


@pytest.mark.parametrize("transport", ["litellm", "direct"])
async def test_a_cut_stream(server: FakeLLMServer, transport: str) -> None:
    server.script(cut_stream(3, reply("a b c d e f g h")))
    error = await failure(server.base_url, transport, stream=True)
    assert (error.kind, error.status_code, error.model) == ("cut_stream", None, MODEL)


@pytest.mark.parametrize("transport", ["litellm", "direct"])
async def test_a_server_that_cannot_be_reached(transport: str) -> None:
    with socket.socket() as closed:  # a loopback port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    error = await failure(f"http://127.0.0.1:{port}/v1", transport)
    assert error.kind == "connection"


def _named(name: str, base: type[Exception] = Exception, **attributes: Any) -> Exception:
    error = type(name, (base,), {})("provider text")
    for key, value in attributes.items():
        setattr(error, key, value)
    return error


@pytest.mark.parametrize(("name", "kind"), sorted(ERROR_KINDS.items()))
def test_every_listed_class_name_gives_its_kind(name: str, kind: ProviderErrorKind) -> None:
    if name != "APIError":  # litellm's catch-all, raised for any status
        assert error_kind(_named(name, status_code=500 if kind != "server" else 400)) == kind  # the class wins
    assert error_kind(_named(name)) == kind


def test_the_kind_of_an_unlisted_class_comes_from_its_status_then_its_bases() -> None:
    assert error_kind(_named("Weird", status_code=429)) == "rate_limit"
    assert error_kind(_named("Weird", status_code=502)) == "server"
    assert error_kind(_named("Weird", status_code=422)) == "bad_request"  # litellm reports a 422 as a 500
    assert error_kind(_named("Weird", status_code=418)) == "unknown"
    rate_limited = type("RateLimitError", (Exception,), {})
    assert error_kind(_named("OrgRateLimit", rate_limited)) == "rate_limit"
    assert error_kind(ValueError("x")) == "unknown"
    assert error_kind(_named("APIError", status_code=402)) == "quota"  # litellm's catch-all: its status tells


def test_a_server_error_caused_by_a_lost_connection_is_a_connection_failure() -> None:
    try:
        try:
            raise ConnectionRefusedError("refused")
        except ConnectionRefusedError as exc:
            raise _named("InternalServerError", status_code=500) from exc
    except Exception as error:
        assert error_kind(error) == "connection"
    timed_out = _named("Weird", status_code=503)
    timed_out.__context__ = _named("APITimeoutError")
    assert error_kind(timed_out) == "timeout"
    refused = _named("AuthenticationError", status_code=401)
    refused.__cause__ = ConnectionResetError()
    assert error_kind(refused) == "auth"  # only a server or unknown failure looks at its cause


def test_provider_fields_read_litellms_names_and_the_response_header() -> None:
    response = type("Response", (), {"headers": {"retry-after": "12"}})()
    error = _named("RateLimitError", status_code=429, llm_provider="anthropic", response=response)
    assert provider_fields(error) == {"provider": "anthropic", "status_code": 429, "retry_after": 12.0,
                                      "kind": "rate_limit"}
    assert provider_fields(error, "openai")["provider"] == "openai"  # the transport's own knowledge wins
    dated = _named("RateLimitError", response=type("Response", (), {"headers": {"retry-after": "Wed, 21 Oct"}})())
    assert provider_fields(dated)["retry_after"] is None


def test_error_for_keeps_the_message_and_sets_the_fields() -> None:
    error = error_for(_named("ContextWindowExceededError", status_code=400, llm_provider="openai"), "openai/x")
    assert str(error) == "LLM request to 'openai/x' failed (HTTP 400): ContextWindowExceededError: provider text"
    assert fields(error) == ("context_window", 400, None, "openai", "openai/x")
    again = pickle.loads(pickle.dumps(error))  # a Celery worker's error reaches the caller with its fields
    assert (str(again), fields(again)) == (str(error), fields(error))


def test_failure_data_carries_the_kind_of_provider_failures_only() -> None:
    assert failure_data(InferenceError("down", kind="server")) == {"error": "down", "error_type": "InferenceError",
                                                                   "error_kind": "server"}
    assert failure_data(InferenceError("stopped")) == {"error": "stopped", "error_type": "InferenceError"}
    assert failure_data(RuntimeError("x")) == {"error": "x", "error_type": "RuntimeError"}


def test_the_kinds_are_listed_once() -> None:
    assert set(ERROR_KINDS.values()) < set(PROVIDER_ERROR_KINDS)
    assert len(set(PROVIDER_ERROR_KINDS)) == len(PROVIDER_ERROR_KINDS)
