"""RobotLab for Python: LLM robots, networks of robots, tools, MCP and memory.

``import robotlab`` is fast: the public names below load their modules on first use, and
litellm is imported only when a robot first calls a real model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .budget import Ledger
    from .config import configure, get_config, reload_config
    from .doom_loop import DoomLoopDetector
    from .errors import (
        AwaitTimeout,
        BudgetExceeded,
        BusError,
        ConfigurationError,
        DelegationTimeout,
        DependencyError,
        InferenceError,
        MCPError,
        RactorBoundaryError,
        RobotLabError,
        ToolError,
        ToolLoopError,
        ToolNotFoundError,
    )
    from .messages import Message, TextMessage, ToolCallMessage, ToolMessage, ToolResultMessage, UserMessage
    from .result import RobotResult
    from .robot import Robot, build
    from .run_config import RunConfig
    from .runnable import Runnable
    from .streaming import Chunk, Event
    from .tool_config import INHERIT, NONE
    from .tool_manifest import ToolManifest
    from .tools import AskUser, Tool, tool

_EXPORTS: dict[str, str] = {
    "AskUser": "tools",
    "AwaitTimeout": "errors",
    "BudgetExceeded": "errors",
    "BusError": "errors",
    "Chunk": "streaming",
    "ConfigurationError": "errors",
    "DelegationTimeout": "errors",
    "DependencyError": "errors",
    "DoomLoopDetector": "doom_loop",
    "Event": "streaming",
    "INHERIT": "tool_config",
    "InferenceError": "errors",
    "Ledger": "budget",
    "MCPError": "errors",
    "Message": "messages",
    "NONE": "tool_config",
    "RactorBoundaryError": "errors",
    "Robot": "robot",
    "RobotLabError": "errors",
    "RobotResult": "result",
    "RunConfig": "run_config",
    "Runnable": "runnable",
    "TextMessage": "messages",
    "Tool": "tools",
    "ToolCallMessage": "messages",
    "ToolError": "errors",
    "ToolLoopError": "errors",
    "ToolManifest": "tool_manifest",
    "ToolMessage": "messages",
    "ToolNotFoundError": "errors",
    "ToolResultMessage": "messages",
    "UserMessage": "messages",
    "build": "robot",
    "configure": "config",
    "get_config": "config",
    "reload_config": "config",
    "tool": "tools",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        if not name.startswith("_"):
            try:  # submodules such as robotlab.config and robotlab.tool_config
                return importlib.import_module(f".{name}", __name__)
            except ModuleNotFoundError as exc:
                if exc.name != f"{__name__}.{name}":
                    raise
        raise AttributeError(f"module 'robotlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
