"""The ``chat`` app configuration."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["ChatConfig"]


class ChatConfig(AppConfig):
    """The example app; RobotLab imports its ``robots`` module at startup."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"
