"""What an OpenAI-compatible provider does to request parameters, learned from litellm once per model.

litellm maps OpenAI's parameters for each provider and model (``max_tokens`` becomes
``max_completion_tokens`` for OpenAI's reasoning models, parameters a model does not take are dropped
under ``drop_params``). The direct client must send the same body, so :func:`quirks_for` asks litellm's
provider config once per model, one probe parameter at a time, and caches what it did as a
:class:`Quirks`: renames and drops applied to every later request's parameters without litellm.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ._litellm import load_litellm

__all__ = ["Quirks", "quirks_for"]

#: The OpenAI parameters probed, each with a typical value.
_PROBE: dict[str, Any] = {
    "max_tokens": 1237, "max_completion_tokens": 1239, "temperature": 0.37, "top_p": 0.41,
    "presence_penalty": 0.43, "frequency_penalty": 0.47, "seed": 1249, "stop": ["<probe-stop>"],
    "n": 1, "logit_bias": {"1251": 1}, "logprobs": True, "top_logprobs": 3, "parallel_tool_calls": True,
    "tool_choice": "auto", "user": "probe-user", "reasoning_effort": "low",
}


@dataclass(frozen=True, slots=True)
class Quirks:
    """Parameter renames and drops for one model (empty: send everything as given)."""

    renames: dict[str, str] = field(default_factory=dict)
    dropped: frozenset[str] = frozenset()

    def apply(self, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` as litellm would send them to this model."""
        if not (self.renames or self.dropped) or not params:
            return params
        return {self.renames.get(key, key): value for key, value in params.items() if key not in self.dropped}


_cache: dict[tuple[str, str], Quirks] = {}
_lock = threading.Lock()


def _learn(provider: str, model: str) -> Quirks:
    litellm = load_litellm()
    from litellm.types.utils import LlmProviders
    from litellm.utils import ProviderConfigManager

    config = ProviderConfigManager.get_provider_chat_config(model=model, provider=LlmProviders(provider))
    if config is None:
        return Quirks()
    del litellm
    renames: dict[str, str] = {}
    dropped: set[str] = set()
    for key, value in _PROBE.items():  # one parameter at a time: litellm maps some in pairs
        mapped = config.map_openai_params({key: value}, {}, model, drop_params=True)
        if key in mapped:
            continue
        if len(mapped) == 1:
            renames[key] = next(iter(mapped))
        else:
            dropped.add(key)
    return Quirks(renames, frozenset(dropped))


def quirks_for(provider: str, model: str) -> Quirks:
    """The cached :class:`Quirks` of ``model`` at ``provider`` (no quirks when litellm cannot tell)."""
    key = (provider, model)
    quirks = _cache.get(key)
    if quirks is None:
        with _lock:
            try:
                quirks = _learn(provider, model)
            except Exception:  # a provider or model litellm does not know: parameters go as given
                quirks = Quirks()
            _cache[key] = quirks
    return quirks
