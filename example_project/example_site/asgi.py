"""ASGI entry point: HTTP and the chat websocket (``daphne example_site.asgi:application``)."""

from __future__ import annotations

import importlib.util
import os

from django.core.asgi import get_asgi_application

__all__ = ["application"]

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_site.settings")
django_application = get_asgi_application()  # sets Django up before the app's consumers are imported

if importlib.util.find_spec("robotlab_django.asgi") is None:  # no websocket: the page polls instead
    application = django_application
else:
    from robotlab_django.asgi import get_robotlab_asgi_application

    # the robots over MCP at /mcp/ (docs/django/mcp.md), when the mcp package is installed
    application = get_robotlab_asgi_application(mcp="/mcp/" if importlib.util.find_spec("mcp") else None)
