"""A test app of a project's own data: notes with an owner, for the model tools' tests."""

from __future__ import annotations

from pathlib import Path

from django.apps import AppConfig


class NotesAppConfig(AppConfig):
    """The notes app."""

    name = "tests.robotlab_django.notesapp"
    label = "notesapp"
    default_auto_field = "django.db.models.BigAutoField"
    # named, as the robot app is: a namespace package may span several checkouts on sys.path
    path = str(Path(__file__).resolve().parent)
