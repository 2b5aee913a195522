"""Who asks the MCP endpoint: a RobotLab API token, or (optionally) an OAuth 2.1 token of django-oauth-toolkit.

:class:`RobotLabTokenVerifier` is the SDK's ``TokenVerifier``: the SDK's bearer middleware calls it for every
request and refuses one without a valid token (401, ``WWW-Authenticate`` naming the protected-resource metadata)
or without the scope the endpoint requires (403). A verified token becomes the SDK's ``AccessToken``: its
``subject`` the user's primary key, its ``scopes`` what the token may reach.

- A RobotLab API token (``manage.py robotlab_token``) reaches every robot: scopes ``mcp`` and ``robots``.
- An OAuth access token issued by django-oauth-toolkit (with ``oauth=True``), valid and unexpired, has the scopes
  it was granted: ``mcp`` to use the endpoint, ``robots`` for every robot, ``robot:<name>`` for one.

:func:`caller` reads the request's token back in a handler and loads its user (active users only), every
request; :func:`allowed_agents` says which robots its scopes reach.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from robotlab_django.protocols import tokens

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

__all__ = ["ALL_ROBOTS", "ENDPOINT_SCOPE", "RobotLabTokenVerifier", "allowed_agents", "caller", "robot_scope"]

#: The scope every token needs to use the MCP endpoint.
ENDPOINT_SCOPE = "mcp"

#: The scope that reaches every robot and network.
ALL_ROBOTS = "robots"


def robot_scope(name: str) -> str:
    """The scope that reaches the robot or network ``name`` only: ``robot:<name>``."""
    return f"robot:{name}"


def _robotlab_token(token: str) -> AccessToken | None:
    user = tokens.authenticate(f"Bearer {token}")
    if user is None:
        return None
    return AccessToken(token=token, client_id="robotlab-token", subject=str(user.pk),
                       scopes=[ENDPOINT_SCOPE, ALL_ROBOTS])


def _oauth_token(token: str) -> AccessToken | None:
    from oauth2_provider.models import get_access_token_model

    row = get_access_token_model().objects.select_related("user", "application").filter(token=token).first()
    if row is None or not row.is_valid() or row.user is None or not row.user.is_active:
        return None
    client = row.application.client_id if row.application is not None else "oauth"
    return AccessToken(token=token, client_id=str(client), subject=str(row.user.pk), scopes=row.scope.split(),
                       expires_at=int(row.expires.timestamp()))


class RobotLabTokenVerifier:
    """The SDK's token verifier over RobotLab API tokens, and django-oauth-toolkit's tokens with ``oauth``."""

    def __init__(self, *, oauth: bool = False) -> None:
        """``oauth``: accept django-oauth-toolkit's access tokens too (it must be installed)."""
        self.oauth = oauth

    def _verify(self, token: str) -> AccessToken | None:
        if token.startswith(tokens.PREFIX):
            return _robotlab_token(token)
        return _oauth_token(token) if self.oauth else None

    async def verify_token(self, token: str) -> AccessToken | None:
        """The access the bearer ``token`` grants, or ``None`` for a token that is unknown, expired or revoked."""
        return await sync_to_async(self._verify)(token)


def _user(pk: str) -> _User | None:
    return get_user_model().objects.filter(pk=pk, is_active=True).first()


async def caller() -> tuple[_User, frozenset[str]]:
    """The user the current request's token belongs to, and its scopes.

    Raises:
        PermissionError: no verified token (the endpoint was served without the SDK's bearer middleware) or its
            user is gone or inactive.
    """
    token = get_access_token()
    user = await sync_to_async(_user)(token.subject) if token is not None and token.subject else None
    if token is None or user is None:
        raise PermissionError("No valid bearer token.")
    return user, frozenset(token.scopes)


def allowed_agents(scopes: frozenset[str], names: list[str]) -> frozenset[str]:
    """The robots and networks of ``names`` that ``scopes`` reach."""
    if ALL_ROBOTS in scopes:
        return frozenset(names)
    return frozenset(name for name in names if robot_scope(name) in scopes)
