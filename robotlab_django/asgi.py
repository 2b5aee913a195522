"""An ASGI application serving Django's HTTP and the app's websockets.

``application = get_robotlab_asgi_application()`` in your ``asgi.py`` (after
``DJANGO_SETTINGS_MODULE`` is set); run it with daphne or uvicorn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asgiref.typing import ASGIApplication

    from robotlab_django.mcp.asgi import MCPEndpoint

__all__ = ["get_robotlab_asgi_application"]


def get_robotlab_asgi_application(http_application: ASGIApplication | None = None,
                                  extra_websocket_urlpatterns: Sequence[Any] = (), *,
                                  mcp: MCPEndpoint | str | None = None) -> Any:
    """``ProtocolTypeRouter``: HTTP to Django, websockets through the origin check, auth, then the URLs.

    Args:
        http_application: The HTTP app; defaults to ``django.core.asgi.get_asgi_application()``
            (which sets Django up first).
        extra_websocket_urlpatterns: Your own websocket routes, tried after the app's.
        mcp: Serve the registered robots over MCP: a path (``"/mcp/"``) or an
            :class:`~robotlab_django.mcp.asgi.MCPEndpoint` (needs the ``mcp`` package; see docs/django/mcp.md).

    The websocket stack is ``AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(...)))``: a
    page from a host outside ``ALLOWED_HOSTS`` cannot open the socket (the websocket's CSRF defence).
    """
    from django.core.asgi import get_asgi_application

    http = http_application if http_application is not None else get_asgi_application()
    from channels.auth import AuthMiddlewareStack
    from channels.routing import ProtocolTypeRouter, URLRouter
    from channels.security.websocket import AllowedHostsOriginValidator

    from robotlab_django.routing import websocket_urlpatterns

    if mcp is not None:
        from robotlab_django.mcp.asgi import MCPEndpoint, mcp_router

        endpoint = mcp if isinstance(mcp, MCPEndpoint) else MCPEndpoint(prefix=mcp)
        http = mcp_router(http, endpoint)  # type: ignore[arg-type,assignment]  # both ASGI apps
    routes = URLRouter([*websocket_urlpatterns, *extra_websocket_urlpatterns])
    websocket = AllowedHostsOriginValidator(AuthMiddlewareStack(routes))
    return ProtocolTypeRouter({"http": http, "websocket": websocket})
