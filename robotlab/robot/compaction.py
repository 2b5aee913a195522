"""Compacting a robot's history before a model call, when its ``auto_compact`` setting asks for it.

``auto_compact="context_window"`` compacts when the estimated tokens of the instructions and history
(characters / 4) reach ``compact_threshold`` (default 0.80) of the model's context window; a callable
``auto_compact`` is called with the robot before every model call. Either way the work runs inside the
``compaction`` hook family, whose ``on_compaction`` hooks may supply the new history instead.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING

from .. import hooks, llm
from ..attachments import content_chars
from ..errors import DependencyError

if TYPE_CHECKING:
    from .core import Robot

__all__ = ["DEFAULT_COMPACT_THRESHOLD", "DEFAULT_CONTEXT_WINDOW", "context_window", "maybe_compact"]

logger = logging.getLogger("robotlab")

#: The context window assumed when the model's is unknown.
DEFAULT_CONTEXT_WINDOW = 200_000
#: The share of the context window that triggers ``auto_compact="context_window"``.
DEFAULT_COMPACT_THRESHOLD = 0.80


def context_window(model: str | None) -> int:
    """``model``'s context window in tokens, as litellm knows it, else :data:`DEFAULT_CONTEXT_WINDOW`."""
    if model is None:
        return DEFAULT_CONTEXT_WINDOW
    try:
        info = llm.load_litellm().get_model_info(model)
        window = info.get("max_input_tokens") or info.get("max_tokens")
        return int(window) if window else DEFAULT_CONTEXT_WINDOW
    except Exception:
        return DEFAULT_CONTEXT_WINDOW


async def maybe_compact(robot: Robot, model: str | None, scope: hooks.HookScope) -> None:
    """Compact ``robot``'s history before a call to ``model`` when its ``auto_compact`` asks for it.

    Args:
        robot: The robot whose conversation is compacted (its hooks' contexts name it; a callable
            ``auto_compact`` is called with it).
        model: The model of the coming call (its context window is the measure).
        scope: The hook scope of the run.
    """
    config = robot.config
    mode = config.auto_compact
    conversation = robot.conversation
    if mode is None or mode == "none" or not conversation.messages:
        return
    if callable(mode):
        strategy = "custom"
    elif mode == "context_window":
        estimated = sum(content_chars(m.get("content")) for m in conversation.for_request()) // 4
        threshold = config.compact_threshold
        share = DEFAULT_COMPACT_THRESHOLD if threshold is None else threshold
        if estimated < context_window(model) * share:
            return
        strategy = "context_window"
    else:
        logger.warning("[%s] auto_compact: unknown strategy %r; skipping compaction", robot.name, mode)
        return
    context = hooks.CompactionHookContext(
        robot=robot, messages_before=tuple(robot.messages), config=config, strategy=strategy
    )

    async def compact() -> None:
        await hooks.call("on_compaction", context, **scope._asdict())
        if context.compacted_messages is not None:
            robot.replace_messages(context.compacted_messages)
            return
        if callable(mode):
            outcome = mode(robot)
            if inspect.isawaitable(outcome):
                await outcome
        else:
            try:
                robot.compress_history()
            except DependencyError as exc:
                logger.warning("[%s] auto_compact: %s; skipping compaction", robot.name, exc)
                return
        context.compacted_messages = robot.messages

    await hooks.run("compaction", context, compact, **scope._asdict())
