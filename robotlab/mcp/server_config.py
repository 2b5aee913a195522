"""MCP server configurations (RobotLab's ``MCP::Server``): a name, a transport and a timeout.

A configuration is usually written as a dict in a robot's ``mcp_servers=`` or ``mcp=``::

    {"name": "time", "transport": {"type": "stdio", "command": "mcp-server-time"}}
    {"name": "docs", "description": "Search the manual", "timeout": 30,
     "transport": {"type": "streamable-http", "url": "http://127.0.0.1:8000/mcp",
                   "headers": {"X-Team": "a"}, "auth_provider": lambda: "Bearer ..."}}

``transport`` keys: ``type`` (always), ``command``, ``args``, ``env`` (merged over the process
environment) and ``cwd`` for stdio; ``url``, ``headers`` and ``auth_provider`` (a callable
returning the ``Authorization`` header value, called for every request) for HTTP and SSE.
An SDK server object (``mcp.server.mcpserver.MCPServer``) is accepted too and is served in
process, which is what tests want (:meth:`ServerConfig.in_process`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigurationError

__all__ = ["DEFAULT_TIMEOUT", "IN_PROCESS", "VALID_TRANSPORT_TYPES", "ServerConfig", "check_servers", "server_name"]

VALID_TRANSPORT_TYPES: tuple[str, ...] = ("stdio", "sse", "ws", "websocket", "streamable-http", "http")
"""The transport types a configuration may name."""

DEFAULT_TIMEOUT = 15.0
"""Seconds to wait for a connection or a response when the configuration sets no ``timeout``."""

IN_PROCESS = "memory"
"""The transport type of :meth:`ServerConfig.in_process` (an SDK server object in this process)."""

_URL_TYPES = ("ws", "websocket", "sse", "streamable-http", "http")


def _normalize_timeout(value: str | float | None) -> float:
    if value is None:
        return DEFAULT_TIMEOUT
    seconds = float(value)
    if seconds >= 1000:  # milliseconds
        seconds /= 1000.0
    return max(seconds, 1.0)


class ServerConfig:
    """One MCP server: ``name``, ``transport`` (a dict with ``type``), ``timeout`` and ``description``.

    Unknown keyword arguments are ignored, for forward compatibility.

    Raises:
        ValueError: an invalid transport type (``"Invalid transport type: X. Must be one of: ..."``),
            stdio without a command (``"StdIO transport requires :command"``), a URL transport
            without a url (``"Transport requires :url"``) or a timeout that is not a number.
        TypeError: ``transport`` is not a mapping.
    """

    def __init__(
        self,
        *,
        name: object,
        transport: Mapping[str, Any],
        timeout: str | float | None = None,
        description: object = None,
        **ignored: object,
    ) -> None:
        if not isinstance(transport, Mapping):
            raise TypeError(
                f"transport must be a mapping such as {{'type': 'stdio', 'command': ...}}, got {transport!r}"
            )
        self.name = str(name)
        self.description = "" if description is None else str(description)
        self.transport: dict[str, Any] = {str(k): v for k, v in transport.items()}
        self.transport["type"] = str(self.transport.get("type") or "").lower()
        self.timeout = _normalize_timeout(timeout)
        self._validate()

    def _validate(self) -> None:
        kind = self.transport_type
        if kind not in VALID_TRANSPORT_TYPES:
            raise ValueError(
                f"Invalid transport type: {kind}. Must be one of: {', '.join(VALID_TRANSPORT_TYPES)}"
            )
        if kind == "stdio" and not self.transport.get("command"):
            raise ValueError("StdIO transport requires :command")
        if kind in _URL_TYPES and not self.transport.get("url"):
            raise ValueError("Transport requires :url")

    @classmethod
    def in_process(
        cls, server: object, *, name: str | None = None, description: str | None = None,
        timeout: str | float | None = None,
    ) -> ServerConfig:
        """A configuration for an SDK server object (``MCPServer`` or a low-level ``Server``) in process."""
        config = cls.__new__(cls)
        config.name = str(name or getattr(server, "name", None) or "mcp-server")
        config.description = str(description or getattr(server, "description", None) or "")
        config.transport = {"type": IN_PROCESS, "server": server}
        config.timeout = _normalize_timeout(timeout)
        return config

    @classmethod
    def from_value(cls, value: object) -> ServerConfig:
        """``value`` as a configuration: a :class:`ServerConfig`, a dict, or an SDK server object.

        Raises:
            TypeError: anything else (``"Invalid server config"``).
            ValueError: a dict that fails validation.
        """
        if isinstance(value, ServerConfig):
            return value
        if isinstance(value, Mapping):
            return cls(**{str(k): v for k, v in value.items()})
        if type(value).__module__.startswith("mcp.server"):
            return cls.in_process(value)
        raise TypeError("Invalid server config")

    @property
    def transport_type(self) -> str:
        """The transport type, lowercased (``"stdio"``, ``"streamable-http"``, ...)."""
        return str(self.transport["type"])

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two configurations the same server (connections are shared by key)."""
        return (self.name, self.timeout, repr(sorted(self.transport.items())))

    @property
    def target(self) -> str:
        """The command (stdio), the URL, or the server name (in process): how messages name the server."""
        return str(self.transport.get("command") or self.transport.get("url") or self.name)

    def to_dict(self) -> dict[str, Any]:
        """``name``, ``description``, ``transport`` and ``timeout``."""
        return {
            "name": self.name,
            "description": self.description,
            "transport": dict(self.transport),
            "timeout": self.timeout,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ServerConfig) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"<ServerConfig {self.name!r} {self.transport_type} {self.target!r}>"


def server_name(value: object) -> str:
    """The name of a server given as a config, a dict or an SDK server (Ruby ``extract_server_name``)."""
    if isinstance(value, ServerConfig):
        return value.name
    if isinstance(value, Mapping):
        return str(value.get("name") or value)
    return str(getattr(value, "name", None) or value)


_NO_SDK_CLIENT = ("ws", "websocket")
"""Transport types RobotLab names that the installed MCP SDK (2.x) has no client for."""


def _bad_field(value: object) -> str:
    """The field of a server entry that failed :class:`ServerConfig`'s validation."""
    if not isinstance(value, Mapping):
        return "entry: give a dict such as {'name': 'time', 'transport': {'type': 'stdio', 'command': '...'}}"
    if "name" not in value:
        return "name."
    transport = value.get("transport")
    if not isinstance(transport, Mapping):
        return "transport: a dict with a 'type'."
    kind = str(transport.get("type") or "").lower()
    if kind not in VALID_TRANSPORT_TYPES:
        return "transport.type."
    return "transport.command." if kind == "stdio" else "transport.url."


def check_servers(servers: Iterable[Any], *, robot_name: str) -> None:
    """Check, when a robot is built, that each MCP server entry can work.

    A server that is down is only found at run time (a warning, as in RobotLab); an entry that
    can never work is an error here, naming the robot, the server and the field to fix.

    Args:
        servers: the entries of ``mcp_servers=`` or of an ``mcp=`` list (dicts, configs or SDK servers).
        robot_name: the robot being built.

    Raises:
        ConfigurationError: an entry is not a server configuration, lacks a field its transport
            needs, or names a transport type with no client (``ws``/``websocket``).
    """
    for index, value in enumerate(servers):
        if isinstance(value, str):  # a server name that selects a configured server
            continue
        label = f"MCP server {server_name(value)!r} (entry {index})"
        try:
            config = ServerConfig.from_value(value)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"Robot '{robot_name}': {label} is invalid: {exc}. Fix its {_bad_field(value)}",
                robot_name=robot_name,
            ) from exc
        if config.transport_type in _NO_SDK_CLIENT:
            raise ConfigurationError(
                f"Robot '{robot_name}': {label} uses transport.type {config.transport_type!r}, which the MCP "
                "SDK has no client for. Serve it over 'streamable-http' (or 'sse' or 'stdio') instead.",
                robot_name=robot_name,
            )
