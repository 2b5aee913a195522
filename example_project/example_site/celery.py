"""The example project's Celery app: ``celery -A example_site worker`` (broker ``REDIS_URL``)."""

from __future__ import annotations

import os

from celery import Celery

__all__ = ["app"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_site.settings")

#: The Celery app; configured from the ``CELERY_*`` Django settings.
app = Celery("example_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
