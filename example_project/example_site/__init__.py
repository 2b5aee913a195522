"""The example project: a chat page on RobotLab (see docs/django/chat.md).

Importing the package loads the Celery app when Celery is installed, so ``@shared_task``
functions bind to it (Celery's Django layout).
"""

from __future__ import annotations

try:
    from .celery import app as celery_app
except ImportError:  # pragma: no cover - Celery is optional
    celery_app = None

__all__ = ["celery_app"]
