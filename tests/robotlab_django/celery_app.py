"""The tests' Celery app: ``celery -A tests.robotlab_django.celery_app worker`` runs robotlab's tasks."""

from __future__ import annotations

import os

from celery import Celery

__all__ = ["app"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.robotlab_django.settings")

#: The app: settings from ``CELERY_*`` in the Django settings, tasks from robotlab_django.
app = Celery("robotlab_tests")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["robotlab_django"])
