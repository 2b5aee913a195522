"""RobotLab for Python: LLM robots, networks of robots, tools, MCP and memory.

``import robotlab`` is fast: the public names below load their modules on first use, and
litellm is imported only when a robot first calls a real model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The public names and the module each one loads from are the one table ``_EXPORTS`` below. The imports in
# this block and the literal ``__all__`` after the table say the same for type checkers and IDEs, which cannot
# read the table, and tests/robotlab/test_public_api.py fails when they differ (it prints the block to paste).
if TYPE_CHECKING:
    from .agent_skill import AgentSkill, AgentSkillCatalog
    from .attachments import Attachment
    from .budget import Ledger
    from .bus import BusPoller, Delivery, MessageBus, RobotMessage
    from .config import configure, get_config, reload_config
    from .delegation import DelegationFuture
    from .doom_loop import DoomLoopDetector
    from .errors import (
        AttachmentError,
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
    from .llm.direct import OpenAICompatibleLLM
    from .memory import Memory, MemoryChange, StateProxy, Waiter, create_memory
    from .messages import Message, TextMessage, ToolCallMessage, ToolMessage, ToolResultMessage, UserMessage
    from .narrator import Narrator
    from .network import Network, create_network
    from .result import RobotResult
    from .robot import DEFAULT_MAX_TOOLS, Robot, build
    from .robot.request import ToolCall
    from .run_config import RunConfig
    from .run_context import RunContext
    from .runnable import Runnable
    from .streaming import Chunk, Event
    from .task import FlowResult, Task
    from .text.compression import HistoryCompressor
    from .text.convergence import Convergence
    from .text.document_store import DocumentStore
    from .text.embeddings import Embedder, LexicalEmbedder, LiteLLMEmbedder, SentenceTransformerEmbedder
    from .text.history_search import HistoryResult, search_history
    from .tools.approval import ApprovalRequest, Decision, TerminalApprover
    from .tools.ask import AskChannel, QueueChannel, TerminalChannel
    from .tools.ask_user import AskUser
    from .tools.base import Tool
    from .tools.function import FunctionTool, tool
    from .tools.manifest import ToolDescriptor, ToolManifest, ToolRegistry, tool_registry
    from .tools.resolution import INHERIT, NONE
    from .tools.script import Capabilities, ScriptTool

_EXPORTS: dict[str, str] = {
    "AgentSkill": "agent_skill",
    "AgentSkillCatalog": "agent_skill",
    "ApprovalRequest": "tools.approval",
    "AskChannel": "tools.ask",
    "AskUser": "tools.ask_user",
    "Attachment": "attachments",
    "AttachmentError": "errors",
    "AwaitTimeout": "errors",
    "BudgetExceeded": "errors",
    "BusError": "errors",
    "BusPoller": "bus",
    "Capabilities": "tools.script",
    "Chunk": "streaming",
    "CompactionHookContext": "hooks",
    "ConfigurationError": "errors",
    "Convergence": "text.convergence",
    "DEFAULT_MAX_TOOLS": "robot",
    "Decision": "tools.approval",
    "DelegationFuture": "delegation",
    "DelegationTimeout": "errors",
    "Delivery": "bus",
    "DependencyError": "errors",
    "DocumentStore": "text.document_store",
    "DoomLoopDetector": "doom_loop",
    "Embedder": "text.embeddings",
    "Event": "streaming",
    "FlowResult": "task",
    "FunctionTool": "tools.function",
    "HistoryCompressor": "text.compression",
    "HistoryResult": "text.history_search",
    "Hook": "hooks",
    "HookContext": "hooks",
    "HookRegistry": "hooks",
    "INHERIT": "tools.resolution",
    "InferenceError": "errors",
    "LearnHookContext": "hooks",
    "Ledger": "budget",
    "LexicalEmbedder": "text.embeddings",
    "LiteLLMEmbedder": "text.embeddings",
    "LlmGenerationHookContext": "hooks",
    "MCPError": "errors",
    "Memory": "memory",
    "MemoryChange": "memory",
    "Message": "messages",
    "MessageBus": "bus",
    "NONE": "tools.resolution",
    "Narrator": "narrator",
    "Network": "network",
    "NetworkRunHookContext": "hooks",
    "OpenAICompatibleLLM": "llm.direct",
    "QueueChannel": "tools.ask",
    "Robot": "robot",
    "RobotLabError": "errors",
    "RobotMessage": "bus",
    "RobotResult": "result",
    "RunConfig": "run_config",
    "RunContext": "run_context",
    "RunHookContext": "hooks",
    "Runnable": "runnable",
    "ScriptTool": "tools.script",
    "SentenceTransformerEmbedder": "text.embeddings",
    "StateProxy": "memory",
    "Task": "task",
    "TaskHookContext": "hooks",
    "TerminalApprover": "tools.approval",
    "TerminalChannel": "tools.ask",
    "TextMessage": "messages",
    "Tool": "tools.base",
    "ToolCall": "robot.request",
    "ToolCallHookContext": "hooks",
    "ToolCallMessage": "messages",
    "ToolDescriptor": "tools.manifest",
    "ToolError": "errors",
    "ToolLoopError": "errors",
    "ToolManifest": "tools.manifest",
    "ToolMessage": "messages",
    "ToolNotFoundError": "errors",
    "ToolRegistry": "tools.manifest",
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
    "search_history": "text.history_search",
    "tool": "tools.function",
    "tool_registry": "tools.manifest",
    "with_hook_scope": "hooks",
}

#: The public names: :data:`_EXPORTS`'s keys, written out so that type checkers and IDEs (which cannot read the
#: table) know what ``import robotlab`` exports; a test keeps the two equal.
__all__ = [
    "AgentSkill", "AgentSkillCatalog", "ApprovalRequest", "AskChannel", "AskUser", "Attachment", "AttachmentError",
    "AwaitTimeout", "BudgetExceeded", "BusError", "BusPoller", "Capabilities", "Chunk", "CompactionHookContext",
    "ConfigurationError", "Convergence", "DEFAULT_MAX_TOOLS", "Decision", "DelegationFuture", "DelegationTimeout",
    "Delivery", "DependencyError", "DocumentStore", "DoomLoopDetector", "Embedder", "Event", "FlowResult",
    "FunctionTool", "HistoryCompressor", "HistoryResult", "Hook", "HookContext", "HookRegistry", "INHERIT",
    "InferenceError", "LearnHookContext", "Ledger", "LexicalEmbedder", "LiteLLMEmbedder", "LlmGenerationHookContext",
    "MCPError", "Memory", "MemoryChange", "Message", "MessageBus", "NONE", "Narrator", "Network",
    "NetworkRunHookContext", "OpenAICompatibleLLM", "QueueChannel", "Robot", "RobotLabError", "RobotMessage",
    "RobotResult", "RunConfig", "RunContext", "RunHookContext", "Runnable", "ScriptTool",
    "SentenceTransformerEmbedder", "StateProxy", "Task", "TaskHookContext", "TerminalApprover", "TerminalChannel",
    "TextMessage", "Tool", "ToolCall", "ToolCallHookContext", "ToolCallMessage", "ToolDescriptor", "ToolError",
    "ToolLoopError", "ToolManifest", "ToolMessage", "ToolNotFoundError", "ToolRegistry", "ToolResultMessage",
    "UserMessage", "Waiter", "build", "clear_hooks", "configure", "create_memory", "create_network",
    "current_hook_scope", "get_config", "get_hooks", "on", "reload_config", "search_history", "tool", "tool_registry",
    "with_hook_scope",
]


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
