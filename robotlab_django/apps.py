"""The app configuration: label ``robotlab``; registers the system checks and discovers robots."""

from __future__ import annotations

import importlib.util
import sys

from django.apps import AppConfig

__all__ = ["A2A_PACKAGES", "RobotLabConfig"]


#: What the A2A server needs (the ``protocols`` extra): a Celery worker with them registers its push task.
A2A_PACKAGES = ("a2a", "starlette", "sse_starlette")


class RobotLabConfig(AppConfig):
    """``robotlab_django`` under the label ``robotlab``.

    ``ready()`` registers the system checks (:mod:`robotlab_django.checks`), connects the executor (which
    dispatches the task rows of distributed network turns, :mod:`robotlab_django.networks.distributed`), the receivers
    that close a logged-out user's sockets, revoke a user's API tokens when their password changes and erase a
    deleted user's content and schedule the online evals of completed runs (:mod:`robotlab_django.evals.online`),
    and the A2A push notifications of a task's state changes (:mod:`robotlab_django.protocols.push`; a Celery worker
    with the A2A server's packages registers their task, :mod:`robotlab_django.a2a.push_task`),
    hands ``ROBOTLAB["INSTRUMENT"]`` to the core (:mod:`robotlab_django.tracing.instrument`),
    and imports the ``robots`` module of every installed app
    (:meth:`~robotlab_django.registry.RobotRegistry.autodiscover`).
    """

    name = "robotlab_django"
    label = "robotlab"
    verbose_name = "RobotLab"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register checks and autodiscover robot modules."""
        from django.core import checks

        from robotlab_django import checks as robotlab_checks
        from robotlab_django.chat import revocation
        from robotlab_django.conf import app_settings
        from robotlab_django.evals import checks as eval_checks
        from robotlab_django.evals import online
        from robotlab_django.privacy import erasure
        from robotlab_django.protocols import push as a2a_push
        from robotlab_django.protocols import tokens as api_tokens
        from robotlab_django.registry import registry
        from robotlab_django.runs import executor  # noqa: F401  (its receivers dispatch task rows)
        from robotlab_django.tracing import instrument

        checks.register(robotlab_checks.check_settings)
        checks.register(robotlab_checks.check_llm_available)
        checks.register(robotlab_checks.check_model_endpoint)
        checks.register(robotlab_checks.check_channel_layer, checks.Tags.urls)
        checks.register(robotlab_checks.check_login_url, checks.Tags.urls)
        checks.register(robotlab_checks.check_workers, deploy=True)
        checks.register(robotlab_checks.check_broker_transport, deploy=True)
        checks.register(robotlab_checks.check_database_connections)
        checks.register(eval_checks.check_online_evals)
        revocation.connect_signals()  # a logout or deactivation closes the user's thread sockets
        api_tokens.connect_signals()  # a password change revokes the user's API tokens
        erasure.connect_signals()  # ROBOTLAB["ERASE_ON_USER_DELETE"]: deleting a user erases their content
        online.connect_signals()  # ROBOTLAB["ONLINE_EVALS"]: a share of completed runs scored in the background
        instrument.connect_signals()  # ROBOTLAB["INSTRUMENT"]: the core's spans and metrics on or off
        a2a_push.connect_signals()  # A2A push notifications: a task's state changes sent to its webhooks
        if "celery" in sys.modules and all(importlib.util.find_spec(name) for name in A2A_PACKAGES):
            from robotlab_django.a2a import push_task  # noqa: F401  (registers send_push_notification)
        if app_settings.AUTODISCOVER:
            registry.autodiscover()
