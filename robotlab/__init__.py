"""RobotLab for Python: LLM robots, networks of robots, tools, MCP and memory.

``import robotlab`` is fast: the public names below load their modules on first use, and
litellm is imported only when a robot first calls a real model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from ._loop import ToolCall
    from .agent_skill import AgentSkill, AgentSkillCatalog
    from .ask import AskChannel, QueueChannel, TerminalChannel
    from .budget import Ledger
    from .bus import BusPoller, Delivery, MessageBus, RobotMessage
    from .config import configure, get_config, reload_config
    from .convergence import Convergence
    from .delegation import DelegationFuture
    from .document_store import DocumentStore
    from .doom_loop import DoomLoopDetector
    from .embeddings import Embedder, LexicalEmbedder, LiteLLMEmbedder, SentenceTransformerEmbedder
    from .errors import (
        AwaitTimeout,
        BudgetExceeded,
        BusError,
        ConfigurationError,
        DelegationTimeout,
        DependencyError,
        InferenceError,
        MCPError,
        RobotLabError,
        ToolError,
        ToolLoopError,
        ToolNotFoundError,
    )
    from .history import HistoryCompressor, HistoryResult, search_history
    from .hooks import (
        CompactionHookContext,
        Hook,
        HookContext,
        HookRegistry,
        LearnHookContext,
        LlmGenerationHookContext,
        NetworkRunHookContext,
        RunHookContext,
        TaskHookContext,
        ToolCallHookContext,
        clear_hooks,
        current_hook_scope,
        get_hooks,
        on,
        with_hook_scope,
    )
    from .memory import Memory, MemoryChange, StateProxy, Waiter, create_memory
    from .messages import Message, TextMessage, ToolCallMessage, ToolMessage, ToolResultMessage, UserMessage
    from .narrator import Narrator
    from .network import Network, create_network
    from .openai_compat import OpenAICompatibleLLM
    from .result import RobotResult
    from .robot import DEFAULT_MAX_TOOLS, Robot, build
    from .run_config import RunConfig
    from .runnable import Runnable
    from .script_tool import Capabilities, ScriptTool
    from .streaming import Chunk, Event
    from .task import FlowResult, Task
    from .tool_config import INHERIT, NONE
    from .tool_manifest import ToolDescriptor, ToolManifest, ToolRegistry, tool_registry
    from .tools import AskUser, FunctionTool, Tool, tool

_EXPORTS: dict[str, str] = {
    "AgentSkill": "agent_skill",
    "AgentSkillCatalog": "agent_skill",
    "AskChannel": "ask",
    "AskUser": "tools",
    "AwaitTimeout": "errors",
    "BudgetExceeded": "errors",
    "BusError": "errors",
    "BusPoller": "bus",
    "Capabilities": "script_tool",
    "Chunk": "streaming",
    "CompactionHookContext": "hooks",
    "ConfigurationError": "errors",
    "Convergence": "convergence",
    "DEFAULT_MAX_TOOLS": "robot",
    "DelegationFuture": "delegation",
    "DelegationTimeout": "errors",
    "Delivery": "bus",
    "DependencyError": "errors",
    "DocumentStore": "document_store",
    "DoomLoopDetector": "doom_loop",
    "Embedder": "embeddings",
    "Event": "streaming",
    "FlowResult": "task",
    "FunctionTool": "tools",
    "HistoryCompressor": "history",
    "HistoryResult": "history",
    "Hook": "hooks",
    "HookContext": "hooks",
    "HookRegistry": "hooks",
    "INHERIT": "tool_config",
    "InferenceError": "errors",
    "LearnHookContext": "hooks",
    "Ledger": "budget",
    "LexicalEmbedder": "embeddings",
    "LiteLLMEmbedder": "embeddings",
    "LlmGenerationHookContext": "hooks",
    "MCPError": "errors",
    "Memory": "memory",
    "MemoryChange": "memory",
    "Message": "messages",
    "MessageBus": "bus",
    "NONE": "tool_config",
    "Narrator": "narrator",
    "Network": "network",
    "NetworkRunHookContext": "hooks",
    "OpenAICompatibleLLM": "openai_compat",
    "QueueChannel": "ask",
    "Robot": "robot",
    "RobotLabError": "errors",
    "RobotMessage": "bus",
    "RobotResult": "result",
    "RunConfig": "run_config",
    "RunHookContext": "hooks",
    "Runnable": "runnable",
    "ScriptTool": "script_tool",
    "SentenceTransformerEmbedder": "embeddings",
    "StateProxy": "memory",
    "Task": "task",
    "TaskHookContext": "hooks",
    "TerminalChannel": "ask",
    "TextMessage": "messages",
    "Tool": "tools",
    "ToolCall": "_loop",
    "ToolCallHookContext": "hooks",
    "ToolCallMessage": "messages",
    "ToolDescriptor": "tool_manifest",
    "ToolError": "errors",
    "ToolLoopError": "errors",
    "ToolManifest": "tool_manifest",
    "ToolMessage": "messages",
    "ToolNotFoundError": "errors",
    "ToolRegistry": "tool_manifest",
    "ToolResultMessage": "messages",
    "UserMessage": "messages",
    "Waiter": "memory",
    "build": "robot",
    "clear_hooks": "hooks",
    "configure": "config",
    "create_memory": "memory",
    "create_network": "network",
    "current_hook_scope": "hooks",
    "get_config": "config",
    "get_hooks": "hooks",
    "on": "hooks",
    "reload_config": "config",
    "search_history": "history",
    "tool": "tools",
    "tool_registry": "tool_manifest",
    "with_hook_scope": "hooks",
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
