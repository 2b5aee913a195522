"""The MCP endpoint as ASGI: the SDK's streamable HTTP app, stateless, in front of Django's HTTP app.

:func:`mcp_router` sends requests for the endpoint (``/mcp/`` by default) and its protected-resource metadata
(``/.well-known/oauth-protected-resource/mcp/``) to the SDK's app and every other request to Django::

    application = get_robotlab_asgi_application(mcp_prefix="/mcp/")   # or mcp_router(django_app) yourself

The SDK's app is built with ``stateless_http=True`` and JSON responses: no session id, nothing kept between
requests, so any web process answers any request. Every request needs a bearer token the SDK's middleware checks
with :class:`~robotlab_django.mcp.auth.RobotLabTokenVerifier` (scope ``mcp``). Its host must be one of
``ALLOWED_HOSTS`` (Django's check; these requests do not pass through Django).

The SDK's request manager runs in a task of the event loop that serves the requests (daphne does not send the
ASGI lifespan events): one app per event loop, started on its first request.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from robotlab_django.mcp.auth import ENDPOINT_SCOPE, RobotLabTokenVerifier
from robotlab_django.mcp.server import build_server

__all__ = ["MCPEndpoint", "mcp_router"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_METADATA = "/.well-known/oauth-protected-resource"

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class MCPEndpoint:
    """Where and how the endpoint is served.

    Attributes:
        prefix: Its path, ending in ``/``.
        resource_url: Its absolute URL (``https://example.com/mcp/``): with it, the protected-resource metadata
            (RFC 9728) is served and a 401 names it.
        issuer_url: The OAuth authorization server the metadata names (django-oauth-toolkit's, e.g.
            ``https://example.com/o``); defaults to the resource URL's origin.
        oauth: Accept django-oauth-toolkit's access tokens as well as RobotLab API tokens.
    """

    prefix: str = "/mcp/"
    resource_url: str | None = None
    issuer_url: str | None = None
    oauth: bool = False

    def serves(self, path: str) -> bool:
        """Whether ``path`` is the endpoint's or its metadata's."""
        return path in (self.prefix, self.prefix.rstrip("/"), _METADATA + self.prefix.rstrip("/"),
                        _METADATA + self.prefix)

    def build(self) -> tuple[ASGIApp, Any]:
        """A fresh SDK app for the endpoint, and its request manager."""
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.transport_security import TransportSecuritySettings

        server = build_server()
        issuer = self.issuer_url or _origin(self.resource_url) or "http://localhost"
        auth = AuthSettings(issuer_url=issuer, resource_server_url=self.resource_url,  # type: ignore[arg-type]
                            required_scopes=[ENDPOINT_SCOPE], validate_token_resource=False)
        app = server.streamable_http_app(
            streamable_http_path=self.prefix, stateless_http=True, json_response=True, auth=auth,
            token_verifier=RobotLabTokenVerifier(oauth=self.oauth),
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        return app, server.session_manager


def _origin(url: str | None) -> str | None:
    if not url:
        return None
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


async def _refuse(send: Send, status: int, text: str) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": text.encode()})


def _host(scope: Scope) -> str:
    return next((value.decode("latin-1") for key, value in scope.get("headers", ()) if key == b"host"), "")


class _PerLoop:
    """The SDK app of each running event loop, its request manager started in a task of that loop."""

    def __init__(self, endpoint: MCPEndpoint) -> None:
        self.endpoint = endpoint
        self.apps: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[ASGIApp, asyncio.Event]] = (
            weakref.WeakKeyDictionary())
        self.tasks: set[asyncio.Task[None]] = set()

    async def app(self) -> ASGIApp:
        """This loop's app, once its request manager runs.

        Raises:
            RuntimeError: the request manager could not start (the next request tries again).
        """
        loop = asyncio.get_running_loop()
        if loop not in self.apps:
            app, manager = self.endpoint.build()
            started = asyncio.Event()
            self.apps[loop] = (app, started)
            task = loop.create_task(self._run(loop, manager, started))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        app, started = self.apps[loop]
        await started.wait()
        entry = self.apps.get(loop)
        if entry is None or entry[0] is not app:
            raise RuntimeError("The MCP request manager could not start; it is logged.")
        return app

    async def _run(self, loop: asyncio.AbstractEventLoop, manager: Any, started: asyncio.Event) -> None:
        try:
            async with manager.run():
                started.set()
                await asyncio.Future()  # until the loop ends
        except Exception:
            logger.exception("robotlab: the MCP request manager stopped")
        finally:
            self.apps.pop(loop, None)  # the next request starts another
            started.set()


def mcp_router(http: ASGIApp, endpoint: MCPEndpoint | None = None) -> ASGIApp:
    """An ASGI app serving ``endpoint`` (``/mcp/`` by default) with the SDK and everything else with ``http``."""
    endpoint = endpoint or MCPEndpoint()
    apps = _PerLoop(endpoint)

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not endpoint.serves(scope.get("path", "")):
            await http(scope, receive, send)
            return
        domain, _ = split_domain_port(_host(scope))
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS or (
                [".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])):
            await _refuse(send, 400, "Bad Request: the Host header names a host outside ALLOWED_HOSTS.")
            return
        await (await apps.app())(scope, receive, send)

    return route
