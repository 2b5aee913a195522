"""The agent card of each registered robot and network.

A card names the agent, its JSON-RPC endpoint (for protocol 1.0 and 0.3, at the same URL), its skill, that it
streams, that it sends push notifications when ``ROBOTLAB["A2A_PUSH_URLS"]`` allows some webhooks, and that
requests carry a RobotLab API token as an HTTP bearer token.
"""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol

import robotlab
from robotlab_django.conf import app_settings
from robotlab_django.registry import registry

__all__ = ["SECURITY_SCHEME", "agent_card", "agent_names"]

#: The name of the bearer-token security scheme in every card.
SECURITY_SCHEME = "robotlabToken"


def agent_names() -> list[str]:
    """Every registered robot and network name (the A2A agents served)."""
    return [*registry.names(), *registry.network_names()]


def agent_card(name: str, url: str) -> AgentCard:
    """The card of the registered robot or network ``name`` served at ``url`` (its JSON-RPC endpoint).

    Raises:
        UnknownRobotError: no robot or network has that name.
    """
    entry: Any = registry.lookup(name)
    kind = "network" if registry.is_network(name) else "robot"
    description = entry.description or f"The RobotLab {kind} {name}."
    token = HTTPAuthSecurityScheme(scheme="bearer", description="A RobotLab API token: manage.py robotlab_token "
                                   "USERNAME prints one.")
    return AgentCard(
        name=name, description=description, version=robotlab.__version__,
        provider=AgentProvider(organization="RobotLab", url=url),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_1_0),
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=PROTOCOL_VERSION_0_3),
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=bool(app_settings.A2A_PUSH_URLS),
                                       extended_agent_card=False),
        security_schemes={SECURITY_SCHEME: SecurityScheme(http_auth_security_scheme=token)},
        security_requirements=[SecurityRequirement(schemes={SECURITY_SCHEME: StringList()})],
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id=name, name=name, description=description, tags=[kind, "robotlab"],
                           input_modes=["text/plain"], output_modes=["text/plain"])],
    )
