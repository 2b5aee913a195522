"""The app configuration: label ``robotlab``; registers the system checks and discovers robots."""

from __future__ import annotations

from django.apps import AppConfig


class RobotLabConfig(AppConfig):
    """``robotlab_django`` under the label ``robotlab``.

    ``ready()`` registers the system checks (:mod:`robotlab_django.checks`), connects the executor (which
    dispatches the task rows of distributed network turns, :mod:`robotlab_django.network_turns`) and imports
    the ``robots`` module of every installed app (:meth:`~robotlab_django.registry.RobotRegistry.autodiscover`).
    """

    name = "robotlab_django"
    label = "robotlab"
    verbose_name = "RobotLab"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register checks and autodiscover robot modules."""
        from django.core import checks

        from . import checks as robotlab_checks
        from . import executor  # noqa: F401  (its receiver dispatches the task rows a network turn queues)
        from .conf import app_settings
        from .registry import registry

        checks.register(robotlab_checks.check_settings)
        checks.register(robotlab_checks.check_llm_available)
        if app_settings.AUTODISCOVER:
            registry.autodiscover()
