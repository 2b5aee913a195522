"""Configuration: ``robotlab.get_config()``, ``robotlab.configure(...)``.

Layers, lowest first: built-in defaults, the user file (``$XDG_CONFIG_HOME/robotlab/robotlab.yml``,
default ``~/.config/robotlab/robotlab.yml``), the project file (``./config/robotlab.yml``),
(each also read under RobotLab's names, ``robot_lab/robot_lab.yml`` and ``config/robot_lab.yml``,
which ours win over when both exist),
``ROBOT_LAB_*`` environment variables (``__`` separates nested keys, for example
``ROBOT_LAB_MODEL`` or ``ROBOT_LAB_LLM__REQUEST_TIMEOUT``), then :func:`configure`.

A YAML file is flat, or split by environment (``defaults:``, ``development:``, ``test:``,
``production:``); the environment is ``ROBOT_LAB_ENV``, else ``development``.

Provider API keys fall back to the providers' own variables (``OPENAI_API_KEY``,
``ANTHROPIC_API_KEY``, ...), which litellm reads too, so the prefix is optional for keys.

Attribute access on this module reads the current configuration, so
``robotlab.config.model`` works like RobotLab's ``RobotLab.config.model``.

The settings models live in :mod:`robotlab._settings`, imported (with pydantic-settings) when the
settings are first read: ``import robotlab.config`` itself loads neither pydantic nor YAML.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError

if TYPE_CHECKING:
    from ._settings import (
        PROVIDER_DEFAULT_MODELS,
        PROVIDER_EXTRA_VARIABLES,
        PROVIDER_KEY_VARIABLES,
        Config,
        LLMSettings,
        SandboxSettings,
        project_config_path,
        user_config_path,
    )

__all__ = [
    "PROVIDER_DEFAULT_MODELS",
    "PROVIDER_EXTRA_VARIABLES",
    "PROVIDER_KEY_VARIABLES",
    "Config",
    "LLMSettings",
    "SandboxSettings",
    "configure",
    "get_config",
    "project_config_path",
    "reload_config",
    "user_config_path",
]

#: The names this module takes from :mod:`robotlab._settings` on first use.
_LAZY = frozenset(
    {
        "PROVIDER_DEFAULT_MODELS",
        "PROVIDER_EXTRA_VARIABLES",
        "PROVIDER_KEY_VARIABLES",
        "Config",
        "LLMSettings",
        "SandboxSettings",
        "project_config_path",
        "user_config_path",
    }
)

_lock = threading.Lock()
_config: Config | None = None


def get_config() -> Config:
    """The current configuration, loaded on first use."""
    global _config
    config = _config
    if config is not None:  # read on every traced call: no lock once loaded (a reference is read whole)
        return config
    with _lock:
        if _config is None:
            from ._settings import Config

            _config = Config()
        return _config


def reload_config() -> Config:
    """Forget the loaded configuration and read files and environment again."""
    global _config
    with _lock:
        _config = None
    return get_config()


def configure(**settings: Any) -> Config:
    """Override settings at run time: ``robotlab.configure(model="openai/gpt-4o-mini")``.

    Nested sections take a dict (``llm={"api_base": "http://127.0.0.1:4000/v1"}``) and are
    merged into the current values. An unknown name raises :class:`ConfigurationError`.
    """
    from pydantic import ValidationError

    from ._settings import Config, LLMSettings, SandboxSettings

    config = get_config()
    unknown = sorted(set(settings) - set(Config.model_fields))
    if unknown:
        raise ConfigurationError(
            f"Unknown setting(s): {', '.join(unknown)}. Known settings: {', '.join(sorted(Config.model_fields))}",
            setting=unknown[0],
        )
    try:
        for name, value in settings.items():
            if name == "llm" and isinstance(value, dict):
                value = LLMSettings.model_validate({**config.llm.model_dump(), **value})
            elif name == "sandbox" and isinstance(value, dict):
                value = SandboxSettings.model_validate({**config.sandbox.model_dump(), **value})
            setattr(config, name, value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigurationError(f"Invalid setting: {problems}", setting=name) from None
    return config


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name in _LAZY:
        from . import _settings

        return getattr(_settings, name)
    return getattr(get_config(), name)
