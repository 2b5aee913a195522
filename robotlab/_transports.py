"""The names of the LLM transports, listed once: the values of the ``llm_transport`` setting.

A leaf of the foundation, so the settings model (:mod:`robotlab._settings`) types the setting with them without
importing :mod:`robotlab.llm`; :mod:`robotlab.llm.transport` publishes them (``LLMTransport``, ``TRANSPORTS``).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["TRANSPORTS", "LLMTransport"]

LLMTransport = Literal["auto", "litellm", "direct"]
"""How robots reach the model: ``auto`` (the direct client for OpenAI-compatible models, litellm for the rest),
``litellm`` or ``direct``."""

TRANSPORTS: tuple[LLMTransport, ...] = get_args(LLMTransport)
"""Every :data:`LLMTransport`, in its order."""
