"""The app configuration: label ``robotlab``; registers the system checks and discovers robots."""

from __future__ import annotations

from django.apps import AppConfig


class RobotLabConfig(AppConfig):
    """``robotlab_django`` under the label ``robotlab``.

    ``ready()`` registers the system checks (:mod:`robotlab_django.checks`), connects the executor (which
    dispatches the task rows of distributed network turns, :mod:`robotlab_django.network_turns`), the receivers
    that close a logged-out user's sockets and erase a deleted user's content, and imports
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
        from . import erasure, executor, revocation  # noqa: F401  (executor: its receiver dispatches task rows)
        from .conf import app_settings
        from .registry import registry

        checks.register(robotlab_checks.check_settings)
        checks.register(robotlab_checks.check_llm_available)
        checks.register(robotlab_checks.check_channel_layer, checks.Tags.urls)
        checks.register(robotlab_checks.check_login_url, checks.Tags.urls)
        revocation.connect_signals()  # a logout or deactivation closes the user's thread sockets
        erasure.connect_signals()  # ROBOTLAB["ERASE_ON_USER_DELETE"]: deleting a user erases their content
        if app_settings.AUTODISCOVER:
            registry.autodiscover()
