"""ServerConfig: the seed's validation messages, timeouts and conversions."""

from __future__ import annotations

from typing import Any

import pytest

from robotlab.mcp import DEFAULT_TIMEOUT, VALID_TRANSPORT_TYPES, ServerConfig
from robotlab.mcp.server_config import server_name


def stdio(**extra: Any) -> dict[str, Any]:
    return {"name": "fs", "transport": {"type": "stdio", "command": "mcp-server-fs"}, **extra}


def test_constants() -> None:
    assert VALID_TRANSPORT_TYPES == ("stdio", "sse", "ws", "websocket", "streamable-http", "http")
    assert DEFAULT_TIMEOUT == 15


def test_invalid_transport_type() -> None:
    with pytest.raises(ValueError) as info:
        ServerConfig(name="x", transport={"type": "carrier-pigeon"})
    assert str(info.value) == (
        "Invalid transport type: carrier-pigeon. "
        "Must be one of: stdio, sse, ws, websocket, streamable-http, http"
    )


def test_missing_type_is_invalid() -> None:
    with pytest.raises(ValueError, match=r"^Invalid transport type: \. Must be one of"):
        ServerConfig(name="x", transport={"command": "x"})


def test_stdio_requires_command() -> None:
    with pytest.raises(ValueError) as info:
        ServerConfig(name="x", transport={"type": "stdio"})
    assert str(info.value) == "StdIO transport requires :command"


@pytest.mark.parametrize("kind", ["ws", "websocket", "sse", "streamable-http", "http"])
def test_url_transports_require_url(kind: str) -> None:
    with pytest.raises(ValueError) as info:
        ServerConfig(name="x", transport={"type": kind})
    assert str(info.value) == "Transport requires :url"


def test_type_is_lowercased() -> None:
    config = ServerConfig(name="x", transport={"type": "STDIO", "command": "c"})
    assert config.transport_type == "stdio"


def test_transport_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="transport must be a mapping"):
        ServerConfig(name="x", transport="stdio")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, 15.0), (30, 30.0), (0.5, 1.0), (0, 1.0), (1500, 1.5), (1000, 1.0), (999, 999.0), ("20", 20.0)],
)
def test_timeout_normalisation(given: Any, expected: float) -> None:
    assert ServerConfig(**stdio(timeout=given)).timeout == expected


def test_bad_timeout_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        ServerConfig(**stdio(timeout="soon"))


def test_name_and_description_are_strings_and_extras_ignored() -> None:
    config = ServerConfig(
        name=7, transport={"type": "stdio", "command": "c"}, description=None, colour="blue"
    )
    assert config.name == "7"
    assert config.description == ""


def test_to_dict() -> None:
    config = ServerConfig(**stdio(description="Files", timeout=20))
    assert config.to_dict() == {
        "name": "fs",
        "description": "Files",
        "transport": {"type": "stdio", "command": "mcp-server-fs"},
        "timeout": 20.0,
    }


def test_from_value() -> None:
    config = ServerConfig.from_value(stdio())
    assert ServerConfig.from_value(config) is config
    assert config == ServerConfig.from_value(stdio())
    assert hash(config) == hash(ServerConfig.from_value(stdio()))
    with pytest.raises(TypeError) as info:
        ServerConfig.from_value(42)
    assert str(info.value) == "Invalid server config"


def test_in_process(fixture_server: Any) -> None:
    config = ServerConfig.from_value(fixture_server)
    assert config.name == "fixture"
    assert config.description == "Arithmetic and echo tools for tests"
    assert config.transport_type == "memory"
    assert config.transport["server"] is fixture_server


def test_server_name() -> None:
    assert server_name(stdio()) == "fs"
    assert server_name(ServerConfig(**stdio())) == "fs"
    assert server_name("plain") == "plain"
