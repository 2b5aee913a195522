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
    from django.conf import settings

    from robotlab_django.asgi import get_robotlab_asgi_application

    mcp = None
    if importlib.util.find_spec("mcp"):  # the robots over MCP at /mcp/ (docs/django/mcp.md)
        from robotlab_django.mcp.asgi import MCPEndpoint

        oauth = "oauth2_provider" in settings.INSTALLED_APPS  # ROBOTLAB_MCP_OAUTH=1: its tokens too, issued at /o/
        issuer = settings.ROBOTLAB_MCP_URL.split("/mcp/")[0] + "/o" if oauth and settings.ROBOTLAB_MCP_URL else None
        mcp = MCPEndpoint(prefix="/mcp/", resource_url=settings.ROBOTLAB_MCP_URL, issuer_url=issuer, oauth=oauth)
    application = get_robotlab_asgi_application(mcp=mcp)
