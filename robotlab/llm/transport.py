"""Which transport a request takes: the direct client or litellm, and where the direct one sends it.

``llm_transport`` (``robotlab.configure(llm_transport=...)``, ``ROBOT_LAB_LLM_TRANSPORT``, the Django
app's ``ROBOTLAB['LLM_TRANSPORT']``) is ``"auto"`` (the default), ``"litellm"`` or ``"direct"``:

* ``auto`` sends models served over OpenAI's chat-completions API through
  :class:`~robotlab.llm.direct.OpenAICompatibleLLM` (OpenAI, OpenRouter, Groq, DeepSeek, xAI, Together,
  vLLM's ``hosted_vllm/``, LM Studio, and any unprefixed model when an ``api_base`` is set, such as
  Ollama's ``/v1`` endpoint) and everything else through litellm. Once the process configured litellm
  itself (callbacks, fallbacks, a global ``litellm.api_base`` or model aliases), every request goes
  through litellm so those keep working.
* ``litellm`` always uses :class:`~robotlab.llm.LLMClient`; ``direct`` always uses the direct client
  (an error for a provider it cannot reach).

The direct client reads the configuration litellm reads, in litellm's order (checked against
litellm's ``main.py``, ``get_llm_provider_logic.py`` and each provider's ``transformation.py``): the
``api_base=``/``api_key=`` arguments, then the provider's base-URL and key variables, then the
provider's default URL. So switching transports never changes where a request goes.

:class:`AutoLLM` is the :class:`~robotlab.llm.LLM` robots get by default: it decides once per model and
sets :attr:`~robotlab.llm.LLMResponse.transport` on every answer (a run's result records it).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from .._transports import TRANSPORTS, LLMTransport
from ..errors import ConfigurationError
from ._litellm import litellm_places
from .providers import PROVIDERS
from .types import LLM, LLMRequest, LLMResponse, TextCallback

__all__ = ["PROVIDERS", "SERVER_PROVIDER", "TRANSPORTS", "AutoLLM", "Endpoint", "LLMTransport", "choose_transport",
           "litellm_customised", "require_key", "resolve_endpoint", "routed_without_litellm"]


#: litellm's provider for an OpenAI-compatible server's own model ids (vLLM, LM Studio, Ollama's ``/v1``, ...).
SERVER_PROVIDER = "hosted_vllm"

#: Unprefixed model names litellm takes for OpenAI's own.
_OPENAI_NAMES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "ft:gpt")


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where the direct client sends one model's requests."""

    provider: str
    """litellm's provider name (``openai``, ``groq``, ...)."""
    model: str
    """The name sent in the request body (the litellm prefix removed; OpenRouter's own kept)."""
    api_base: str
    """The base URL, with its ``/v1``."""
    api_key: str | None
    """The key sent as ``Authorization: Bearer``."""


def _env(names: tuple[str, ...]) -> str | None:
    return next((os.environ[name] for name in names if os.environ.get(name)), None)


def resolve_endpoint(model: str, api_base: str | None = None, api_key: str | None = None) -> Endpoint | None:
    """Where litellm would send ``model`` when it is an OpenAI-compatible one, else ``None``.

    With ``api_base``, an id litellm cannot place (``Qwen/Qwen2.5-7B-Instruct`` as vLLM lists it, ``llama3.2`` as
    Ollama does: no provider prefix litellm knows, no model of its lists) is that server's own: OpenAI-compatible
    (litellm's ``hosted_vllm``), its name sent as written, with ``HOSTED_VLLM_API_KEY`` (never another provider's
    key).

    Args:
        model: The litellm model name (``openai/gpt-4o-mini``, ``groq/llama-3.1-8b-instant``, ``gpt-4o``).
        api_base: The configured endpoint, which wins over every variable.
        api_key: The configured key, which wins over every variable.
    """
    provider, _, name = model.partition("/")
    if provider not in PROVIDERS:
        if api_base and not model.startswith(_OPENAI_NAMES) and not litellm_places(model, api_base):
            spec = PROVIDERS[SERVER_PROVIDER]
            return Endpoint(SERVER_PROVIDER, model, api_base, api_key or _env(spec.key_variables))
        if name or not (api_base or model.startswith(_OPENAI_NAMES)):
            return None  # another provider's (litellm translates), or a bare name litellm cannot place
        provider, name = "openai", model
    spec = PROVIDERS[provider]
    base = api_base or _env(spec.base_variables) or spec.default_base
    if base is None:
        return None
    return Endpoint(provider, name, base, api_key or _env(spec.key_variables))


def routed_without_litellm(model: str) -> bool:
    """Whether ``model``'s transport is known without asking litellm (for any ``api_base``).

    ``False`` for another provider's prefix or a bare name that is not OpenAI's: with an ``api_base`` set,
    :func:`resolve_endpoint` asks litellm whether it places such a name, which imports litellm.
    """
    return model.partition("/")[0] in PROVIDERS or model.startswith(_OPENAI_NAMES)


def require_key(endpoint: Endpoint, model: str) -> None:
    """Raise a :class:`ConfigurationError` naming the key variable when a hosted provider has no key.

    Sent without one, the request would come back as the provider's HTTP error many frames later; a local
    server (a custom ``api_base``, vLLM, LM Studio) needs none, so only a provider's own URL is checked.
    """
    spec = PROVIDERS[endpoint.provider]
    if endpoint.api_key or spec.default_base is None or endpoint.api_base != spec.default_base:
        return
    variable = spec.key_variables[0]
    raise ConfigurationError(
        f"No API key for {model!r}: set the {variable} environment variable (or pass api_key=), or choose "
        "an offline model such as robotlab.testing.DemoLLM.",
        setting=variable,
    )


_CUSTOMISING = ("callbacks", "success_callback", "failure_callback", "input_callback", "service_callback",
                "_async_success_callback", "_async_failure_callback", "_async_input_callback",
                "fallbacks", "context_window_fallbacks", "content_policy_fallbacks", "model_fallbacks",
                "model_alias_map", "api_base")


def litellm_customised() -> bool:
    """Whether this process configured litellm itself (callbacks, fallbacks, a global api_base or aliases).

    Only an imported litellm can be configured, so this never imports it.
    """
    litellm = sys.modules.get("litellm")
    return litellm is not None and any(getattr(litellm, name, None) for name in _CUSTOMISING)


def choose_transport(model: str, setting: str, api_base: str | None = None) -> str:
    """``"direct"`` or ``"litellm"`` for ``model`` under ``setting`` (see the module docstring).

    Raises:
        ConfigurationError: ``setting`` is not a transport, or ``"direct"`` for a provider the direct
            client cannot reach.
    """
    if setting not in TRANSPORTS:
        raise ConfigurationError(
            f"llm_transport must be one of {', '.join(map(repr, TRANSPORTS))}, got {setting!r}",
            setting="llm_transport",
        )
    if setting == "litellm":
        return "litellm"
    reachable = resolve_endpoint(model, api_base) is not None
    if setting == "direct":
        if not reachable:
            raise ConfigurationError(
                f"llm_transport='direct' cannot reach {model!r}: it is not served over OpenAI's chat API "
                "(use an openai/, hosted_vllm/, groq/, ... model, set api_base, or llm_transport='auto')",
                setting="llm_transport",
            )
        return "direct"
    return "direct" if reachable and not litellm_customised() else "litellm"


class AutoLLM:
    """The default :class:`~robotlab.llm.LLM`: each model through the transport ``llm_transport`` picks.

    Args:
        transport: ``"auto"``, ``"litellm"`` or ``"direct"``; ``None`` reads the ``llm_transport`` setting
            at each new model.
        api_base: Endpoint override for both transports.
        api_key: Key override for both transports.
        timeout: Seconds per request.
        num_retries: Retries per request (litellm's, or the direct client's same policy).
    """

    def __init__(
        self,
        *,
        transport: str | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        num_retries: int | None = None,
    ) -> None:
        if transport is not None and transport not in TRANSPORTS:
            choose_transport("", transport)  # raises the setting's error
        self.transport = transport
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout
        self.num_retries = num_retries
        self._routes: dict[tuple[str, str], tuple[str, LLM]] = {}
        self._litellm: LLM | None = None

    def __repr__(self) -> str:
        return f"AutoLLM(transport={self.transport or 'setting'!r}, api_base={self.api_base!r})"

    def _setting(self) -> str:
        if self.transport is not None:
            return self.transport
        from ..config import get_config

        return str(get_config().llm_transport)

    def route(self, model: str) -> tuple[str, LLM]:
        """The transport name and client for ``model``, decided once per model and setting."""
        setting = self._setting()
        key = (model, setting)
        route = self._routes.get(key)
        if route is None or (route[0] == "direct" and setting == "auto" and litellm_customised()):
            name = choose_transport(model, setting, self.api_base)
            route = self._routes[key] = (name, self._direct(model) if name == "direct" else self._litellm_client())
        return route

    def _litellm_client(self) -> LLM:
        if self._litellm is None:
            from .litellm_client import LLMClient

            self._litellm = LLMClient(api_base=self.api_base, api_key=self.api_key, timeout=self.timeout,
                                      num_retries=self.num_retries)
        return self._litellm

    def _direct(self, model: str) -> LLM:
        endpoint = resolve_endpoint(model, self.api_base, self.api_key)
        assert endpoint is not None  # choose_transport said so
        require_key(endpoint, model)
        return _shared_direct(endpoint, self.timeout, self.num_retries)


    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Send ``request`` through its model's transport and record which one on the answer."""
        if not request.model:
            raise ConfigurationError(
                "No model set for this request: pass model= to robotlab.build or set ROBOT_LAB_MODEL"
            )
        name, llm = self.route(request.model)
        response = await llm.complete(request, on_text=on_text)
        response.transport = name
        return response


_direct_clients: dict[tuple[Any, ...], LLM] = {}


def _shared_direct(endpoint: Endpoint, timeout: float | None, num_retries: int | None) -> LLM:
    """One direct client per endpoint and options, shared by every robot of the process.

    Robots are cheap and often built per request; a client is not (its ``httpx.AsyncClient`` builds an SSL
    context and a connection pool), so robots with the same connection share one and its kept-alive sockets.
    """
    from .direct import OpenAICompatibleLLM

    key = (endpoint.provider, endpoint.api_base, endpoint.api_key, timeout, num_retries)
    client = _direct_clients.get(key)
    if client is None:
        client = _direct_clients.setdefault(key, OpenAICompatibleLLM(
            api_base=endpoint.api_base, api_key=endpoint.api_key, timeout=timeout, num_retries=num_retries,
            provider=endpoint.provider))
    return client
