"""A test app whose ``robots`` package the registry autodiscovers."""

from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig


class RobotAppConfig(AppConfig):
    """The test app."""

    name = "tests.robotlab_django.robotapp"
    label = "robotapp"
    default_auto_field = "django.db.models.BigAutoField"
    # A namespace package may span several checkouts on sys.path (git worktrees sharing one venv):
    # name this one so Django does not refuse the app.
    path = str(Path(__file__).resolve().parent)
