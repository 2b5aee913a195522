"""RobotLab's settings models, read from the YAML files and ``ROBOT_LAB_*`` variables.

The implementation behind :mod:`robotlab.config`, which imports this module (and with it
pydantic-settings) the first time the settings are read, so ``import robotlab.config`` is cheap.
The YAML files are read by pydantic-settings' own ``YamlConfigSettingsSource``; this module adds
RobotLab's environment sections (``defaults:`` plus ``development:``/``test:``/``production:``)
and turns a broken file into a :class:`~robotlab.errors.ConfigurationError`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict, YamlConfigSettingsSource

from ._transports import LLMTransport
from .errors import ConfigurationError

__all__ = [
    "PROVIDER_DEFAULT_MODELS",
    "PROVIDER_EXTRA_VARIABLES",
    "PROVIDER_KEY_VARIABLES",
    "Config",
    "LLMSettings",
    "SandboxSettings",
    "project_config_path",
    "user_config_path",
]

#: Environment variables holding each provider's key, in the order providers are tried.
PROVIDER_KEY_VARIABLES: dict[str, str] = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "perplexity": "PERPLEXITY_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "gpustack": "GPUSTACK_API_KEY",
    "xai": "XAI_API_KEY",
    "bedrock": "AWS_ACCESS_KEY_ID",
    "vertex_ai": "GOOGLE_CLOUD_PROJECT",
}

#: Further variables a provider needs before it is chosen as the default (besides its key variable).
PROVIDER_EXTRA_VARIABLES: dict[str, tuple[str, ...]] = {
    "gpustack": ("GPUSTACK_API_BASE", "GPUSTACK_MODEL"),
    "bedrock": ("AWS_SECRET_ACCESS_KEY",),
}

#: The model used for a provider whose key is set when no model is configured.
PROVIDER_DEFAULT_MODELS: dict[str, str] = {
    "anthropic": "anthropic/claude-sonnet-4-20250514",
    "openai": "openai/gpt-4o-mini",
    "gemini": "gemini/gemini-2.0-flash",
    "deepseek": "deepseek/deepseek-chat",
    "mistral": "mistral/mistral-small-latest",
    "perplexity": "perplexity/sonar",
    "openrouter": "openrouter/openai/gpt-4o-mini",
    "gpustack": "gpustack/{GPUSTACK_MODEL}",
    "xai": "xai/grok-3-mini",
    "bedrock": "bedrock/anthropic.claude-3-5-haiku-20241022-v1:0",
    "vertex_ai": "vertex_ai/gemini-2.0-flash",
}

_ENVIRONMENTS = ("development", "test", "production")


def user_config_path(*, seed_name: bool = False) -> Path:
    """``$XDG_CONFIG_HOME/robotlab/robotlab.yml`` (``~/.config`` when the variable is unset).

    Args:
        seed_name: RobotLab's name instead, ``$XDG_CONFIG_HOME/robot_lab/robot_lab.yml``.
    """
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "robot_lab" / "robot_lab.yml" if seed_name else Path(base) / "robotlab" / "robotlab.yml"


def project_config_path(*, seed_name: bool = False) -> Path:
    """``./config/robotlab.yml`` relative to the working directory.

    Args:
        seed_name: RobotLab's name instead, ``./config/robot_lab.yml``.
    """
    return Path.cwd() / "config" / ("robot_lab.yml" if seed_name else "robotlab.yml")


def _environment() -> str:
    return os.environ.get("ROBOT_LAB_ENV") or "development"


class _YamlFile(YamlConfigSettingsSource):
    """pydantic-settings' YAML source, with RobotLab's environment sections and errors."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        try:
            data = super()._read_file(file_path)
        except yaml.YAMLError as exc:
            raise ConfigurationError(f"Invalid YAML in {file_path}: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigurationError(
                f"{file_path} must hold a mapping of settings, got {type(data).__name__}"
            )
        if "defaults" in data or any(env in data for env in _ENVIRONMENTS):
            merged = dict(data.get("defaults") or {})
            merged.update(data.get(_environment()) or {})
            return merged
        return data


class LLMSettings(BaseModel):
    """Connection settings for the LLM provider (``ROBOT_LAB_LLM__*``)."""

    provider: str | None = None
    """Preferred provider when choosing a default model (``anthropic``, ``openai``, ...)."""
    api_base: str | None = None
    """Endpoint override for every request (an OpenAI-compatible server, a proxy, Ollama)."""
    api_key: str | None = Field(default=None, repr=False)
    """Key override for every request; by default each provider's own variable is used."""
    request_timeout: float = 120.0
    """Seconds per LLM request."""
    max_retries: int = 3
    """litellm's retries for a failed request (the only retry layer)."""


class SandboxSettings(BaseModel):
    """The ceiling of what any skill script may get (``ROBOT_LAB_SANDBOX__*``).

    A script's grant is its SKILL.md declaration intersected with this ceiling
    (:meth:`robotlab.script_tool.Capabilities.intersect`). RobotLab confines nothing itself: the
    default executor enforces only the timeout; a confining executor reads the rest.
    """

    fs_read: list[str] = Field(default_factory=lambda: ["."])
    """Paths any skill may read (relative to the working directory)."""
    fs_write: list[str] = Field(default_factory=list)
    """Paths any skill may write."""
    network: bool = False
    """Whether any skill may use the network."""
    timeout: int = 60
    """The most seconds a skill script may run."""


class Config(BaseSettings):
    """RobotLab's settings. Every field can come from a file or a ``ROBOT_LAB_`` variable."""

    model_config = SettingsConfigDict(
        env_prefix="ROBOT_LAB_", env_nested_delimiter="__", extra="ignore", validate_assignment=True
    )

    model: str | None = None
    """Default model for robots that set none (litellm's names: ``openai/gpt-4o-mini``)."""
    llm: LLMSettings = Field(default_factory=LLMSettings)
    """Provider connection settings."""
    llm_transport: LLMTransport = "auto"
    """How robots reach the model by default: ``auto`` (the direct client for OpenAI-compatible models,
    litellm for the rest and whenever litellm itself is configured), ``litellm`` or ``direct``
    (:mod:`robotlab.llm.transport`)."""
    template_path: str | None = None
    """Directory of prompt templates; ``prompts`` when unset."""
    skills_path: str | None = None
    """Directory of AgentSkill bundles (folders holding a ``SKILL.md``); ``~/.prompts/skills`` when unset."""
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    """The ceiling of skill-script capabilities."""
    tools: Any = "none"
    """Global tools allowlist, the lowest level of the tools hierarchy."""
    mcp: Any = "none"
    """Global MCP servers, the lowest level of the MCP hierarchy."""
    max_tool_rounds: int | None = None
    """Default circuit-breaker limit for robots that set none."""
    streaming_enabled: bool = True
    """Whether hosts (the Django app) stream by default."""
    gc_freeze: bool = True
    """Freeze the objects alive once litellm is imported out of the garbage collector's full collections
    (:func:`gc.freeze`), which otherwise walk litellm's 380,000 objects each time (:mod:`robotlab.llm._litellm`)."""
    redis_url: str | None = None
    """Redis for shared memory; ``REDIS_URL`` is used when unset."""
    instrument: bool = True
    """Emit OpenTelemetry GenAI spans and metrics of every run through the global providers
    (:mod:`robotlab.telemetry`); no-ops until the application installs an OpenTelemetry SDK."""
    capture_content: bool = False
    """Record message contents, tool arguments and tool results on the spans (they hold users' data)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Priority: init > env > project file > user file; each file under our name wins over RobotLab's."""
        return (
            init_settings,
            env_settings,
            _YamlFile(settings_cls, project_config_path()),
            _YamlFile(settings_cls, project_config_path(seed_name=True)),
            _YamlFile(settings_cls, user_config_path()),
            _YamlFile(settings_cls, user_config_path(seed_name=True)),
        )

    @property
    def environment(self) -> str:
        """``development``, ``test`` or ``production`` (``ROBOT_LAB_ENV``)."""
        return _environment()

    @property
    def is_development(self) -> bool:
        """Whether the environment is ``development``."""
        return self.environment == "development"

    @property
    def is_test(self) -> bool:
        """Whether the environment is ``test``."""
        return self.environment == "test"

    @property
    def is_production(self) -> bool:
        """Whether the environment is ``production``."""
        return self.environment == "production"

    def provider_key(self, provider: str) -> str | None:
        """The API key for ``provider``: the configured key when it matches, else the provider's variable."""
        if self.llm.api_key and (self.llm.provider or "") == provider:
            return self.llm.api_key
        variable = PROVIDER_KEY_VARIABLES.get(provider)
        return os.environ.get(variable) if variable else None

    def default_model(self) -> str | None:
        """The configured model, else the default of the first provider whose key is set."""
        if self.model:
            return self.model
        order = list(PROVIDER_KEY_VARIABLES)
        if self.llm.provider in order:
            order.remove(self.llm.provider)
            order.insert(0, self.llm.provider)
        for provider in order:
            extra = PROVIDER_EXTRA_VARIABLES.get(provider, ())
            if self.provider_key(provider) and all(os.environ.get(name) for name in extra):
                return PROVIDER_DEFAULT_MODELS[provider].format_map(os.environ)
        return None

    def require_model(self) -> str:
        """:meth:`default_model`, or a :class:`ConfigurationError` saying what to set."""
        model = self.default_model()
        if model is None:
            keys = ", ".join(PROVIDER_KEY_VARIABLES.values())
            raise ConfigurationError(
                "No LLM model configured: pass model='openai/gpt-4o-mini' (any litellm model name) to "
                f"robotlab.build, set ROBOT_LAB_MODEL, or set a provider API key ({keys}).",
                setting="model",
            )
        return model
