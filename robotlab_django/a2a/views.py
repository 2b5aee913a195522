"""The A2A endpoints: the agents' cards, and each agent's JSON-RPC endpoint served by the SDK's dispatcher.

``GET <name>/.well-known/agent-card.json`` (and ``GET`` of the index, every card) need no token: a card tells a
client how to authenticate. ``POST <name>/`` (JSON-RPC: ``SendMessage``, ``SendStreamingMessage``, ``GetTask``,
``ListTasks``, ``CancelTask``, ``SubscribeToTask``, the push-notification configs' operations, and protocol
0.3's ``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``) needs
``Authorization: Bearer <token>``: 401 without a valid one. A session cookie does not authenticate, and CSRF does
not apply.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from starlette.requests import Request

from robotlab_django.a2a.bridge import Exchange, django_response, starlette_request
from robotlab_django.a2a.cards import agent_card, agent_names
from robotlab_django.a2a.handler import AGENT, USER, RobotLabRequestHandler
from robotlab_django.protocols.requests import BodyTooLargeError, check_nesting, read_body
from robotlab_django.protocols.tokens import authenticate
from robotlab_django.registry import UnknownRobotError

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

__all__ = ["TokenContextBuilder", "TokenUser", "agent", "card", "dispatcher", "index", "not_found"]

#: JSON-RPC error code of a request without a valid token (HTTP 401), in the server-defined range.
UNAUTHORIZED = -32401


class TokenUser(User):
    """The Django user of an API token, as the SDK's ``User``."""

    def __init__(self, user: _User) -> None:
        """Wrap the Django ``user``."""
        self.user = user

    @property
    def is_authenticated(self) -> bool:
        """Always: only a valid token gets this far."""
        return True

    @property
    def user_name(self) -> str:
        """The Django username."""
        return str(self.user.get_username())


class TokenContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, plus the token's user and the agent of the URL (put in the scope by :func:`agent`)."""

    def build(self, request: Request) -> ServerCallContext:
        """The call context of ``request``: headers (the protocol version), user, agent."""
        context = super().build(request)
        context.user = TokenUser(request.scope[USER])
        context.state[USER] = request.scope[USER]
        context.state[AGENT] = request.scope[AGENT]
        return context


@cache
def dispatcher() -> JsonRpcDispatcher:
    """The SDK's JSON-RPC dispatcher over :class:`RobotLabRequestHandler` (protocol 1.0, and 0.3 on the same URL)."""
    return JsonRpcDispatcher(request_handler=RobotLabRequestHandler(), context_builder=TokenContextBuilder(),
                             enable_v0_3_compat=True)


def _url(request: HttpRequest, name: str) -> str:
    return request.build_absolute_uri(reverse("robotlab_a2a:agent", args=[name]))


def _error(status: int, code: int, message: str) -> JsonResponse:
    return JsonResponse({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}, status=status)


async def card(request: HttpRequest, name: str) -> HttpResponseBase:
    """``GET <name>/.well-known/agent-card.json``: the agent's card (404 for an unknown name)."""
    try:
        found = await sync_to_async(agent_card)(name, _url(request, name))
    except UnknownRobotError as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    return JsonResponse(agent_card_to_dict(found))


async def index(request: HttpRequest) -> HttpResponseBase:
    """``GET``: every agent's card, ``{"agents": [card, ...]}``."""
    names = await sync_to_async(agent_names)()
    cards = [agent_card_to_dict(await sync_to_async(agent_card)(name, _url(request, name))) for name in names]
    return JsonResponse({"agents": cards})


@csrf_exempt
async def agent(request: HttpRequest, name: str) -> HttpResponseBase:
    """``POST <name>/``: a JSON-RPC request to the agent, answered by the SDK's dispatcher.

    401 without a valid token (a session cookie is not one), 404 for an unknown agent, 405 for another method,
    413 for a body over :func:`~robotlab_django.protocols.requests.body_limit`, each a JSON-RPC error. Streams go out
    as they are generated under an ASGI server; under WSGI, whole once they end.
    """
    if request.method != "POST":
        response = _error(405, -32600, "POST JSON-RPC requests here; the card is at .well-known/agent-card.json.")
        response["Allow"] = "POST"
        return response
    user = await sync_to_async(authenticate)(request.headers.get("Authorization", ""))
    if user is None:
        response = _error(401, UNAUTHORIZED, "Send 'Authorization: Bearer <token>' with a valid API token "
                          "(manage.py robotlab_token USERNAME).")
        response["WWW-Authenticate"] = "Bearer"
        return response
    if name not in await sync_to_async(agent_names)():
        return _error(404, -32001, f"No agent {name!r}.")
    try:
        body = read_body(request)
        check_nesting(body)
    except BodyTooLargeError as exc:
        return _error(413, -32600, str(exc))
    except ValueError as exc:
        return _error(400, -32700, str(exc))
    exchange = Exchange(body)
    bridged = starlette_request(request, exchange, **{USER: user, AGENT: name})
    return await django_response(await dispatcher().handle_requests(bridged), bridged, exchange,
                                 buffered=not isinstance(request, ASGIRequest))


@csrf_exempt
async def not_found(request: HttpRequest, path: str = "") -> HttpResponseBase:
    """Any other path under the A2A URLconf: a JSON-RPC error with HTTP 404."""
    return _error(404, -32601, "No A2A endpoint here: each agent is at <name>/, its card at "
                  "<name>/.well-known/agent-card.json, and the index lists them.")
