"""The parked-run worker test's Celery app: the tests' app with the ``planner`` robot (it asks its user)."""

from __future__ import annotations

from django.conf import settings

from tests.robotlab_django.celery_app import app

__all__ = ["app"]

settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {"planner": "tests.robotlab_django.park_worker.build_planner"}}
