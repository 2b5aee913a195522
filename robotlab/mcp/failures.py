"""RobotLab's :class:`~robotlab.errors.MCPError` wording for what the MCP SDK raises.

The SDK reports failures as its own errors, anyio stream errors or OS errors, often nested in
exception groups. :func:`connect_error` and :func:`request_error` find the one that matters and
say what happened in RobotLab's words (``"MCP server command not found: ..."``, ``"MCP server
did not respond within 15s"``), marking the ones worth retrying.
"""

from __future__ import annotations

import asyncio

from ..errors import MCPError
from .server_config import ServerConfig

__all__ = ["connect_error", "is_lost", "request_error", "root_error", "seconds"]


def seconds(value: float) -> str:
    """A timeout as RobotLab prints it: ``15`` rather than ``15.0``."""
    return f"{value:g}"


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def root_error(error: BaseException) -> BaseException:
    """The exception that matters inside (possibly nested) exception groups."""
    leaves = [e for e in _leaves(error) if not isinstance(e, asyncio.CancelledError)] or [error]
    for leaf in leaves:
        if isinstance(leaf, MCPError) or _sdk_code(leaf) is not None:
            return leaf
    return leaves[0]


def _sdk_code(error: BaseException) -> int | None:
    from mcp.shared.exceptions import MCPError as SDKError

    return error.code if isinstance(error, SDKError) else None


def is_lost(error: BaseException) -> bool:
    """Whether ``error`` says the session's transport is gone (closed stream, broken pipe)."""
    from mcp_types import CONNECTION_CLOSED

    name = type(error).__name__
    return _sdk_code(error) == CONNECTION_CLOSED or name in {
        "ClosedResourceError",
        "BrokenResourceError",
        "EndOfStream",
        "BrokenPipeError",
    }


def _is_timeout(error: BaseException) -> bool:
    from mcp_types import REQUEST_TIMEOUT

    return isinstance(error, TimeoutError) or _sdk_code(error) == REQUEST_TIMEOUT


def connect_error(config: ServerConfig, error: BaseException) -> MCPError:
    """The :class:`MCPError` (with RobotLab's wording) for a connection that could not be made."""
    error = root_error(error)
    if isinstance(error, MCPError):
        return error
    stdio = config.transport_type == "stdio"
    if _is_timeout(error):  # before OSError: TimeoutError is one
        return MCPError(
            f"MCP server '{config.target}' did not respond within {seconds(config.timeout)}s", retryable=True
        )
    if stdio and isinstance(error, OSError) and not isinstance(error, ConnectionError):
        return MCPError(f"MCP server command not found: {config.target} ({error})")
    if stdio and is_lost(error):
        return MCPError(f"MCP server process exited immediately (command: {config.target})")
    if is_lost(error):
        return MCPError(f"MCP server connection lost: {error}", retryable=True)
    if _sdk_code(error) is not None:
        return MCPError(f"MCP server '{config.name}' refused the connection: {error}")
    return MCPError(
        f"Cannot connect to MCP server '{config.name}' ({config.target}): {type(error).__name__}: {error}",
        retryable=True,
    )


def request_error(config: ServerConfig, error: BaseException) -> MCPError:
    """The :class:`MCPError` for a request that failed on a live connection."""
    error = root_error(error)
    if isinstance(error, MCPError):
        return error
    if _is_timeout(error):
        return MCPError(f"MCP server did not respond within {seconds(config.timeout)}s", retryable=True)
    if is_lost(error):
        return MCPError(f"MCP server connection lost: {error or type(error).__name__}", retryable=True)
    if _sdk_code(error) is not None:
        return MCPError(f"MCP server '{config.name}' returned an error: {error}")
    return MCPError(f"MCP request to '{config.name}' failed: {type(error).__name__}: {error}")
