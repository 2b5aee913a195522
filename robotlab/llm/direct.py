"""The direct transport: a low-overhead :class:`~robotlab.llm.LLM` for OpenAI-compatible servers.

:class:`OpenAICompatibleLLM` talks to OpenAI itself or anything that speaks its chat API (vLLM, Ollama,
LM Studio, llama.cpp's server, a proxy) over one pooled ``httpx.AsyncClient``, without litellm's request
pipeline. Why hand-written: measured by ``benchmarks/streaming_cost.py`` against one fake server process
on the project's 2-core machine, a streamed token costs a robot on this client 9-12 us of CPU, the official
openai SDK alone about 150 us and litellm alone 380-480 us; a tool round (``benchmarks/peers.py``, 0 ms
latency) takes 6.6 ms here against the SDK's 9.3 ms. Its SSE parsing is httpx's ``aiter_lines``: ``httpx-sse``'s
parser cost 1.21x as much CPU per token on the same stream (13.1 against 10.8 us, ``benchmarks/sse_parsing.py``).
That CPU is serialized by the GIL when many robots call the model at once. It is what
:class:`~robotlab.llm.transport.AutoLLM` uses for OpenAI-compatible models by default, or pass
``llm=OpenAICompatibleLLM(...)`` to :func:`robotlab.build` yourself.

Requests, answers, streaming, token usage and errors map exactly as with :class:`~robotlab.llm.LLMClient`.
What it does not do is translate between providers: the server must speak OpenAI's format, and every
parameter is sent as given unless ``provider=`` is set (then litellm's per-model mapping, learned once).
Prices come from litellm's price table read as data (:mod:`robotlab.llm.pricing`), without importing litellm;
litellm is imported only for a model that table does not hold at a provider litellm prices, when this process
imported litellm already (its registered prices then count), and to turn a pydantic ``response_format`` into a
JSON schema. ``pricing=`` sets the price yourself.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx

from ..errors import ConfigurationError, InferenceError
from ._litellm import load_litellm
from .guard import check_allow_real_requests, error_for
from .pricing import cost_from_prices, price_per_token
from .quirks import quirks_for
from .types import LLMRequest, LLMResponse, TextCallback, ToolCallRequest

__all__ = ["OpenAICompatibleLLM", "default_ssl_context"]

#: litellm provider prefixes that mean "an OpenAI-compatible server"; they are not part of the model's name.
_PREFIXES = ("openai/", "hosted_vllm/", "lm_studio/", "openai_like/", "gpustack/")
_RETRYABLE = frozenset({408, 409, 429})
#: How long a streamed body may go on after ``[DONE]`` before its connection is dropped instead of reused.
_DRAIN_SECONDS = 1.0


class APIStatusError(Exception):
    """The server answered with an HTTP error (internal: becomes an :class:`InferenceError`)."""

    def __init__(self, status_code: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.retry_after = retry_after


class Timeout(Exception):
    """The request took longer than ``timeout`` (internal; reported as HTTP 408, as litellm does)."""

    status_code = 408


class APIConnectionError(Exception):
    """The server could not be reached (internal: becomes an :class:`InferenceError`)."""


class MidStreamError(Exception):
    """The response stream ended before ``[DONE]`` (internal: reported as an interrupted stream)."""


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """The SSL context httpx builds by default (certifi's roots, or ``SSL_CERT_FILE``), built once per process.

    Every direct client's pool shares it: building one reads the whole root store, about 20 ms of a fresh
    process's first call (``benchmarks/first_call.py``), and again for each event loop a client pools on.
    """
    return httpx.create_ssl_context()


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return max(0.0, min(float(response.headers["retry-after"]), 60.0))
    except (KeyError, ValueError):
        return None


async def _read_to_end(lines: AsyncIterator[str]) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body, already on its way) and drop it.

    httpx returns a connection to its pool only when the response was read to its end; a stream left at
    ``[DONE]`` closes it, and the next call opens a new one (with a TLS handshake on a real provider: measured with
    ``benchmarks/network_jobs.py``, every job of a worker opened its own). A server that keeps the body open
    longer than :data:`_DRAIN_SECONDS` loses its connection instead, as before.
    """
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in lines:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass


def _status_error(response: httpx.Response, body: bytes) -> APIStatusError:
    message = body.decode("utf-8", "replace")[:1000] or response.reason_phrase
    try:
        error = json.loads(body).get("error")
        message = (error.get("message") if isinstance(error, dict) else str(error)) or message
    except (ValueError, AttributeError):
        pass
    return APIStatusError(response.status_code, message, _retry_after(response))


class OpenAICompatibleLLM:
    """An :class:`~robotlab.llm.LLM` that posts straight to an OpenAI-compatible ``/chat/completions``.

    Args:
        api_base: The server's base URL, with its ``/v1`` (``http://localhost:8000/v1`` for vLLM,
            ``http://localhost:11434/v1`` for Ollama). Defaults to OpenAI's.
        api_key: Sent as ``Authorization: Bearer <key>``; local servers usually need none.
        timeout: Seconds per request (default 600).
        num_retries: Retries after HTTP 408/409/429/5xx, timeouts and connection errors (default 0),
            waiting the server's ``Retry-After`` or 0.5 s, 1 s, 2 s, ... A broken stream is not retried.
        pricing: ``(input, output)`` USD per million tokens; by default litellm's prices for the model
            (:mod:`robotlab.llm.pricing`; unknown models cost 0.0).
        headers: Extra HTTP headers on every request.
        provider: litellm's name for the provider (``openai``, ``groq``, ...), which :class:`AutoLLM`
            passes: the model's ``<provider>/`` prefix is removed and parameters are renamed or dropped as
            litellm does for that model (:mod:`robotlab.llm.quirks`). ``None`` sends them as given.
        extra: Any other field sent in every request body (``max_tokens=...``); a request's own
            parameters win.

    The model name is the robot's, less a litellm prefix such as ``openai/`` or ``hosted_vllm/``.
    """

    def __init__(
        self,
        *,
        api_base: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float | None = None,
        num_retries: int | None = None,
        pricing: tuple[float, float] | None = None,
        headers: dict[str, str] | None = None,
        provider: str | None = None,
        **extra: Any,
    ) -> None:
        if not api_base:
            raise ConfigurationError("OpenAICompatibleLLM needs api_base, e.g. 'http://localhost:8000/v1'")
        if num_retries is not None and num_retries < 0:
            raise ConfigurationError(f"num_retries must be 0 or more, got {num_retries}")
        self.api_base = api_base.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.num_retries = num_retries or 0
        self.pricing = pricing
        self.extra = extra
        self.provider = provider
        self._url = f"{self.api_base}/chat/completions"
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # One pooled client per event loop: httpx connections belong to the loop that opened them, and a
        # robot may run on robotlab's background loop (robot.run) as well as on the caller's (arun).
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def __repr__(self) -> str:
        return f"OpenAICompatibleLLM(api_base={self.api_base!r})"

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            timeout = httpx.Timeout(self.timeout if self.timeout is not None else 600.0)
            client = self._clients[loop] = httpx.AsyncClient(timeout=timeout, headers=self._headers,
                                                             verify=default_ssl_context())
        return client

    def use_client(self, client: httpx.AsyncClient) -> None:
        """Send the running loop's requests through ``client`` (one on ``httpx.MockTransport``); call it on the loop.

        :meth:`aclose` closes it. Call it before the loop's first request: a loop that has a client already raises
        :class:`~robotlab.errors.ConfigurationError` (its connections would be left open).
        """
        loop = asyncio.get_running_loop()
        if loop in self._clients:
            raise ConfigurationError(f"{self!r} has a client on this event loop already; call use_client() first")
        self._clients[loop] = client

    def open_pool(self) -> None:
        """Open the connection pool of the running loop now (the first request does otherwise); call it on the loop.

        Builds the ``httpx.AsyncClient`` (and the process's SSL context, :func:`default_ssl_context`, tens of ms,
        the first time); connections open on first use.
        """
        self._client()

    async def aclose(self) -> None:
        """Close the connection pool of the running loop (a later request opens a new one)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()

    def _body(self, request: LLMRequest, stream: bool) -> tuple[dict[str, Any], dict[str, str] | None]:
        model = request.model or ""
        params = request.params
        if self.provider is not None:
            model = model.removeprefix(f"{self.provider}/")
            params = quirks_for(self.provider, model).apply(params) if params else params
        else:
            for prefix in _PREFIXES:
                if model.startswith(prefix):
                    model = model[len(prefix) :]
                    break
        body: dict[str, Any] = {"model": model, "messages": request.messages}
        if request.tools:
            body["tools"] = request.tools
        body.update(self.extra)
        body.update(params)
        headers = body.pop("extra_headers", None)
        body.update(body.pop("extra_body", None) or {})
        schema = body.get("response_format")
        if isinstance(schema, type):  # a pydantic model class: litellm's strict JSON schema for it
            body["response_format"] = load_litellm().utils.type_to_response_format_param(schema)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body, headers

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """POST ``request`` to ``/chat/completions``; stream when ``on_text`` is given."""
        if not request.model:
            raise ConfigurationError(
                "No model set for this request: pass model= to robotlab.build or set ROBOT_LAB_MODEL"
            )
        check_allow_real_requests(request.model, self.api_base)
        body, headers = self._body(request, on_text is not None)
        content = json.dumps(body).encode()
        attempt = 0
        while True:
            try:
                try:
                    if on_text is None:
                        return await self._post(content, headers, request.model)
                    return await self._stream(content, headers, request.model, on_text)
                except httpx.TimeoutException as exc:
                    raise Timeout(f"no answer within {self.timeout or 600.0:g} s") from exc
                except httpx.TransportError as exc:
                    raise APIConnectionError(f"{type(exc).__name__}: {exc}") from exc
            except (InferenceError, ConfigurationError):
                raise
            except Exception as exc:
                status = getattr(exc, "status_code", None)
                retryable = isinstance(exc, Timeout | APIConnectionError) or (
                    isinstance(status, int) and (status in _RETRYABLE or status >= 500)
                )
                if not retryable or attempt >= self.num_retries:
                    raise error_for(exc, request.model, self.provider) from exc
                delay = getattr(exc, "retry_after", None)
                await asyncio.sleep(delay if delay is not None else 0.5 * 2**attempt)
                attempt += 1

    async def _post(self, content: bytes, headers: dict[str, str] | None, model: str) -> LLMResponse:
        response = await self._client().post(self._url, content=content, headers=headers)
        if response.status_code >= 400:
            raise _status_error(response, response.content)
        data = response.json()
        if not isinstance(data, dict) or not data.get("choices"):
            raise ValueError(f"the answer is not a chat completion (no choices): {response.text[:200]}")
        choice = data["choices"][0]
        message = choice.get("message") or {}
        calls = [
            ToolCallRequest(
                id=call.get("id") or f"call_{index}",
                name=(call.get("function") or {}).get("name") or "",
                arguments=(call.get("function") or {}).get("arguments") or "{}",
            )
            for index, call in enumerate(message.get("tool_calls") or [])
        ]
        usage = data.get("usage") or {}
        return self._response(
            model, usage, data.get("model"), content=message.get("content"), tool_calls=calls,
            finish_reason=choice.get("finish_reason"), thinking=message.get("reasoning_content"), raw=data,
        )

    async def _stream(
        self, content: bytes, headers: dict[str, str] | None, model: str, on_text: TextCallback
    ) -> LLMResponse:
        parts: list[str] = []
        thinking: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish_reason = None
        usage: dict[str, Any] = {}
        response_model = None
        done = False
        client = self._client()
        async with client.stream("POST", self._url, content=content, headers=headers) as response:
            if response.status_code >= 400:
                raise _status_error(response, await response.aread())
            lines = response.aiter_lines()
            try:
                async for line in lines:
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        done = True
                        break
                    chunk = json.loads(payload)
                    if chunk.get("error"):
                        error = chunk["error"]
                        raise MidStreamError(error.get("message") if isinstance(error, dict) else str(error))
                    response_model = response_model or chunk.get("model")
                    if (chunk.get("usage") or {}).get("prompt_tokens"):
                        usage = chunk["usage"]
                    for choice in chunk.get("choices") or ():
                        delta = choice.get("delta") or {}
                        finish_reason = choice.get("finish_reason") or finish_reason
                        text = delta.get("content")
                        if text:
                            parts.append(text)
                            on_text(text)
                        if delta.get("reasoning_content"):
                            thinking.append(delta["reasoning_content"])
                        for call in delta.get("tool_calls") or ():
                            slot = calls.setdefault(call.get("index", len(calls)) or 0,
                                                    {"id": None, "name": "", "args": []})
                            slot["id"] = slot["id"] or call.get("id")
                            function = call.get("function") or {}
                            slot["name"] += function.get("name") or ""
                            slot["args"].append(function.get("arguments") or "")
            except httpx.TransportError as exc:
                raise MidStreamError(f"{type(exc).__name__}: {exc}") from exc
            if done:
                await _read_to_end(lines)
        if not done and finish_reason is None:
            raise MidStreamError("the server closed the stream before [DONE]")
        tool_calls = [
            ToolCallRequest(
                id=slot["id"] or f"call_{index}", name=slot["name"], arguments="".join(slot["args"]) or "{}"
            )
            for index, slot in sorted(calls.items())
        ]
        return self._response(
            model, usage, response_model, content="".join(parts) if parts or not tool_calls else None,
            tool_calls=tool_calls, finish_reason=finish_reason, thinking="".join(thinking) or None,
        )

    def _response(
        self, model: str, usage: dict[str, Any], response_model: str | None, **fields: Any
    ) -> LLMResponse:
        input_tokens = int(usage.get("prompt_tokens") or 0)
        output_tokens = int(usage.get("completion_tokens") or 0)
        if self.pricing is not None:
            cost = cost_from_prices(input_tokens, output_tokens, self.pricing)
        elif input_tokens or output_tokens:
            per_input, per_output = price_per_token(model)
            cost = input_tokens * per_input + output_tokens * per_output
        else:
            cost = 0.0
        return LLMResponse(
            input_tokens=input_tokens, output_tokens=output_tokens, cost=cost,
            model=response_model or model, transport="direct", **fields,
            cached_input_tokens=int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0),
        )
