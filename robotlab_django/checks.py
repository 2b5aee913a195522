"""System checks (placeholder, filled below)."""

from __future__ import annotations

from typing import Any


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Validate ``settings.ROBOTLAB``."""
    return []


def check_llm_available(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """Warn when no LLM is configured."""
    return []
