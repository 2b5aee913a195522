"""Model access: the :class:`LLM` protocol, its request and response types, and two transports.

* :mod:`robotlab.llm.types`: :class:`LLM`, :class:`LLMRequest`, :class:`LLMResponse`,
  :class:`ToolCallRequest` and :data:`TextCallback`, shared by every transport and test double.
* :mod:`robotlab.llm.litellm_client`: :class:`LLMClient`, through litellm (any provider it knows).
* :mod:`robotlab.llm.direct`: :class:`OpenAICompatibleLLM`, straight to an OpenAI-compatible server.
* :mod:`robotlab.llm.transport`: :class:`AutoLLM`, the default, choosing between the two per model
  (the ``llm_transport`` setting); :mod:`robotlab.llm.quirks`: per-model parameter mapping from litellm.
* :mod:`robotlab.llm.cache`: :class:`ResponseCache`, the response cache behind ``memory.cache``.
* :mod:`robotlab.llm.pricing`: what a call costs, from litellm's price table read as data without importing
  litellm (:mod:`robotlab.llm.price_table`); :mod:`robotlab.llm.guard`: the guard against real
  providers in tests (:data:`ALLOW_REAL_REQUESTS`, :class:`RealRequestBlocked`) and provider failures.

litellm is imported on first use (:func:`load_litellm`), never at ``import robotlab``: it takes seconds.
``ALLOW_REAL_REQUESTS`` read or set here reads or sets :data:`robotlab.llm.guard.ALLOW_REAL_REQUESTS`.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import guard
from ._litellm import litellm_places, load_litellm
from .cache import ResponseCache
from .guard import RealRequestBlocked, check_allow_real_requests
from .litellm_client import LLMClient
from .transport import AutoLLM
from .types import LLM, LLMRequest, LLMResponse, TextCallback, ToolCallRequest

if TYPE_CHECKING:
    from .direct import OpenAICompatibleLLM

__all__ = [
    "ALLOW_REAL_REQUESTS",
    "AutoLLM",
    "LLM",
    "LLMClient",
    "LLMRequest",
    "LLMResponse",
    "OpenAICompatibleLLM",
    "RealRequestBlocked",
    "ResponseCache",
    "TextCallback",
    "ToolCallRequest",
    "check_allow_real_requests",
    "litellm_places",
    "load_litellm",
]

ALLOW_REAL_REQUESTS: bool
"""Whether requests may go to non-loopback providers (the guard's flag; the pytest plugin clears it)."""


def __getattr__(name: str) -> Any:
    if name == "OpenAICompatibleLLM":  # imports httpx, which ``import robotlab`` does not need
        from .direct import OpenAICompatibleLLM

        globals()[name] = OpenAICompatibleLLM
        return OpenAICompatibleLLM
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(ModuleType):
    """This package's module type: ``ALLOW_REAL_REQUESTS`` is the guard's flag, read and set in one place."""

    @property
    def ALLOW_REAL_REQUESTS(self) -> bool:
        """:data:`robotlab.llm.guard.ALLOW_REAL_REQUESTS`."""
        return guard.ALLOW_REAL_REQUESTS

    @ALLOW_REAL_REQUESTS.setter
    def ALLOW_REAL_REQUESTS(self, value: bool) -> None:
        guard.ALLOW_REAL_REQUESTS = value


sys.modules[__name__].__class__ = _Package
