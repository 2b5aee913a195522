"""The ``orders`` app configuration."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["OrdersConfig"]


class OrdersConfig(AppConfig):
    """The example's data app; RobotLab imports its ``robots`` module at startup."""

    name = "orders"
    default_auto_field = "django.db.models.BigAutoField"
