"""A test app whose ``robots`` package the registry autodiscovers."""

from __future__ import annotations

from django.apps import AppConfig


class RobotAppConfig(AppConfig):
    """The test app."""

    name = "tests.robotlab_django.robotapp"
    label = "robotapp"
    default_auto_field = "django.db.models.BigAutoField"
