"""The tests' ASGI app (``daphne tests.robotlab_django.asgi:application``), for benchmarks/streaming.py."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.robotlab_django.settings")

from robotlab_django.asgi import get_robotlab_asgi_application  # noqa: E402

__all__ = ["application"]

#: HTTP and the thread websocket.
application = get_robotlab_asgi_application()
