"""What one run is handed and what it reports: :class:`RunRequest`, :class:`RunCallbacks`, :class:`RunUsage`.

:func:`~robotlab.robot.plan.plan_run` resolves a robot's settings into a
:class:`~robotlab.robot.plan.RunPlan`, whose :meth:`~robotlab.robot.plan.RunPlan.request` makes the
:class:`RunRequest` that :func:`~robotlab.robot.loop.run_loop` drives. The loop keeps the run's
:class:`RunUsage` up to date and calls its :class:`RunCallbacks`. :class:`ToolCall` is what ``on_tool_call``
receives, and :func:`tool_result_text` is how a tool's return value reads to the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..attachments import Attachment
    from ..budget import Budget, SharedBudget
    from ..llm import LLM
    from ..streaming import Chunk, EventEmitter
    from ..tools import Tool
    from .conversation import Conversation

__all__ = [
    "ContentCallback",
    "RunCallbacks",
    "RunRequest",
    "RunUsage",
    "ToolCall",
    "ToolCallCallback",
    "ToolResultCallback",
    "tool_result_text",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as given to ``on_tool_call``: the id, the tool name and the parsed arguments."""

    id: str
    name: str
    arguments: dict[str, Any] | str


#: Called with each streamed piece of text (``on_content``).
ContentCallback = Callable[["Chunk"], object]
#: Called with each tool call before the tool runs (``on_tool_call``).
ToolCallCallback = Callable[[ToolCall], object]
#: Called with each tool's return value (``on_tool_result``).
ToolResultCallback = Callable[[Any], object]


def tool_result_text(value: object) -> str:
    """A tool's return value as the text sent back to the model."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def parse_arguments(text: str) -> dict[str, Any] | str:
    """A tool call's JSON arguments as a dict, or the text itself when it is not a JSON object."""
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, dict) else text


@dataclass
class RunCallbacks:
    """The callbacks of a run: text chunks, tool calls (before they run) and tool results."""

    content: list[ContentCallback] = field(default_factory=list)
    tool_call: list[ToolCallCallback] = field(default_factory=list)
    tool_result: list[ToolResultCallback] = field(default_factory=list)

    def with_content(self, callback: ContentCallback | None) -> RunCallbacks:
        """These callbacks with ``callback`` (a run's own ``on_content``) after the text ones, when given."""
        content = [*self.content, *([callback] if callback is not None else [])]
        return RunCallbacks(content=content, tool_call=list(self.tool_call), tool_result=list(self.tool_result))


@dataclass
class RunRequest:
    """What one run needs, handed to :func:`~robotlab.robot.loop.run_loop`."""

    robot_name: str
    conversation: Conversation
    request_text: str | None
    llm: LLM
    model: str | None
    params: dict[str, Any]
    tools: Sequence[Tool]
    budget: Budget
    callbacks: RunCallbacks = field(default_factory=RunCallbacks)
    emitter: EventEmitter | None = None
    max_tool_rounds: int | None = None
    doom_loop_threshold: int | None = None
    shared_budgets: Sequence[SharedBudget] = ()
    attachments: Sequence[Attachment] = ()


@dataclass
class RunUsage:
    """What a run has used so far."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
