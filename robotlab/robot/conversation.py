"""A robot's conversation: its chat history and instructions, kept across runs.

Every robot has one (``robot.conversation``); the run loop extends it, and the robot's ``messages``,
``clear_messages``, ``replace_messages``, ``compress_history`` and ``search_history`` read or change it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..text.history_search import HistoryResult

__all__ = ["Conversation"]

_ROLES = frozenset({"system", "user", "assistant", "tool"})


class Conversation:
    """The history (OpenAI-format dicts, without the system prompt) and the instructions sent with it."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.instructions: str | None = None

    def for_request(self) -> list[dict[str, Any]]:
        """What is sent to the model: the instructions as a system message, then the history."""
        if self.instructions:
            return [{"role": "system", "content": self.instructions}, *self.messages]
        return list(self.messages)

    def clear(self, *, keep_system: bool = True) -> None:
        """Forget the history; ``keep_system=False`` also drops the instructions."""
        self.messages.clear()
        if not keep_system:
            self.instructions = None

    def replace(self, messages: Sequence[Mapping[str, Any] | Any]) -> None:
        """Replace the history.

        Each entry is an OpenAI-format dict or an object with ``role`` and ``content``; system entries set the
        instructions.

        Raises:
            ConfigurationError: an entry's role is not system, user, assistant or tool.
        """
        converted: list[dict[str, Any]] = []
        for message in messages:
            item = (
                dict(message)
                if isinstance(message, Mapping)
                else {"role": str(getattr(message, "role", "user")), "content": getattr(message, "content", None)}
            )
            if item.get("role") not in _ROLES:
                raise ConfigurationError(f"replace_messages: invalid role {item.get('role')!r} in {item!r}")
            if item["role"] == "system":
                self.instructions = str(item.get("content") or "") or None
            else:
                converted.append(item)
        self.messages[:] = converted  # in place: a run in progress keeps extending the same list

    def compress(
        self,
        *,
        recent_turns: int = 3,
        keep_threshold: float = 0.6,
        drop_threshold: float = 0.2,
        summarizer: Callable[[str], Any] | None = None,
    ) -> None:
        """Drop (or summarize) old turns unrelated to the recent ones (see :class:`~robotlab.HistoryCompressor`)."""
        from ..text.compression import HistoryCompressor

        compressor = HistoryCompressor(
            messages=list(self.messages),
            recent_turns=recent_turns,
            keep_threshold=keep_threshold,
            drop_threshold=drop_threshold,
            summarizer=summarizer,
        )
        self.replace(compressor())

    def search(self, query: str, *, limit: int = 5) -> list[HistoryResult]:
        """The messages most relevant to ``query``, best first (see :func:`robotlab.search_history`)."""
        from ..text.history_search import search_history

        return search_history(self.messages, query, limit=limit)
