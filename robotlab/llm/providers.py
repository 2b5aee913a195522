"""The OpenAI-compatible providers the direct client serves, as litellm resolves them.

:mod:`robotlab.llm.transport` routes their models to the direct client and reads their variables;
:mod:`robotlab.llm.price_table` prices their models from litellm's table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PROVIDERS", "Provider"]


@dataclass(frozen=True, slots=True)
class Provider:
    """How litellm reaches one OpenAI-compatible provider: its base-URL variables, default URL and key variables."""

    base_variables: tuple[str, ...]
    """The environment variables of its base URL, first set wins."""
    default_base: str | None
    """Its own URL, with its ``/v1`` (``None``: self-hosted, a base URL must be set)."""
    key_variables: tuple[str, ...]
    """The environment variables of its key, first set wins."""


#: OpenAI-compatible providers as litellm resolves them: base-URL variables, default URL, key variables.
PROVIDERS: dict[str, Provider] = {
    "openai": Provider(("OPENAI_BASE_URL", "OPENAI_API_BASE"), "https://api.openai.com/v1", ("OPENAI_API_KEY",)),
    "openrouter": Provider(("OPENROUTER_API_BASE",), "https://openrouter.ai/api/v1",
                           ("OPENROUTER_API_KEY", "OR_API_KEY")),
    "groq": Provider(("GROQ_API_BASE",), "https://api.groq.com/openai/v1", ("GROQ_API_KEY",)),
    "deepseek": Provider(("DEEPSEEK_API_BASE",), "https://api.deepseek.com/beta", ("DEEPSEEK_API_KEY",)),
    "xai": Provider(("XAI_API_BASE",), "https://api.x.ai/v1", ("XAI_API_KEY",)),
    "together_ai": Provider(("TOGETHER_AI_API_BASE",), "https://api.together.ai/v1",
                            ("TOGETHER_API_KEY", "TOGETHER_AI_API_KEY", "TOGETHERAI_API_KEY", "TOGETHER_AI_TOKEN")),
    "hosted_vllm": Provider(("HOSTED_VLLM_API_BASE",), None, ("HOSTED_VLLM_API_KEY",)),
    "lm_studio": Provider(("LM_STUDIO_API_BASE",), None, ("LM_STUDIO_API_KEY",)),
    "gpustack": Provider(("GPUSTACK_API_BASE",), None, ("GPUSTACK_API_KEY",)),
}
