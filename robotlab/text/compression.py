"""Compressing a conversation's history: :class:`HistoryCompressor` prunes old turns by relevance.

Each older message is scored (the cosine of stemmed term-frequency vectors, :mod:`robotlab.text.analysis`)
against the recent turns, then kept, summarized or dropped; messages are read as
:mod:`robotlab.text.history_search` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .. import _ruby
from . import analysis as text_analysis
from .history_search import MIN_SCORE_LENGTH, message_field, message_role, message_text, term_vector

__all__ = ["HistoryCompressor"]

_TOOL_ROLES = frozenset({"tool", "tool_result"})

_KEEP: Any = object()  # HistoryCompressor actions; a summary string is the third kind
_DROP: Any = object()


class HistoryCompressor:
    """Prunes old turns of a conversation by their relevance to its recent turns (Ruby ``HistoryCompressor``).

    The algorithm behind a robot's ``compress_history`` and ``auto_compact``. All arguments are
    required; the defaults (``recent_turns=3``, ``keep_threshold=0.6``, ``drop_threshold=0.2``, no
    summarizer) belong to the robot's method.

    Args:
        messages: the conversation, OpenAI-format chat messages.
        recent_turns: user+assistant pairs at the end that are always kept; the last
            ``recent_turns * 2`` scorable messages form the reference. ``0`` makes every scorable
            message both the reference and a candidate (as in RobotLab).
        keep_threshold: an older message scoring at least this is kept verbatim.
        drop_threshold: an older message scoring below this is dropped.
        summarizer: ``str -> str``, called with the text of a message scoring in between; its
            stripped answer replaces the message's content (same role). ``None``, or a blank
            answer, drops the message instead.

    Raises:
        ValueError: ``keep_threshold <= drop_threshold``, or ``recent_turns`` is negative.
    """

    #: Older messages whose text is shorter than this (after stripping) are kept unscored.
    MIN_SCORE_LENGTH: ClassVar[int] = MIN_SCORE_LENGTH

    def __init__(
        self,
        *,
        messages: Sequence[Any],
        recent_turns: int,
        keep_threshold: float,
        drop_threshold: float,
        summarizer: Callable[[str], Any] | None,
    ) -> None:
        if keep_threshold <= drop_threshold:
            raise ValueError(
                f"keep_threshold ({_ruby.format_number(keep_threshold)}) must be greater than "
                f"drop_threshold ({_ruby.format_number(drop_threshold)})"
            )
        if recent_turns < 0:
            raise ValueError(f"recent_turns must not be negative, got {recent_turns}")
        self.messages = messages
        self.recent_turns = recent_turns
        self.keep_threshold = keep_threshold
        self.drop_threshold = drop_threshold
        self.summarizer = summarizer

    @staticmethod
    def is_pinned(message: object) -> bool:
        """Whether a message is never scored or removed.

        Pinned: system (and ``developer``) messages; ``tool`` messages (and RobotLab's
        ``tool_result``); assistant messages whose text is blank, the tool-call dispatchers; and
        assistant messages that carry ``tool_calls`` whatever their text, since removing or
        rewriting one would orphan its tool results.
        """
        role = message_role(message)
        if role in ("system", "developer") or role in _TOOL_ROLES:
            return True
        if role == "assistant":
            if message_field(message, "tool_calls"):
                return True
            text = message_text(message)
            if text is None or not _ruby.strip(text):
                return True
        return False

    def __call__(self) -> list[Any]:
        """Compress and return the new message list (the input list is not changed).

        Returns a copy of the input when there is nothing to do: no messages, nothing scorable,
        every scorable message inside the recent window, or no recent text long enough to score
        against (the stemmer is not needed then). Otherwise each older scorable message is kept,
        summarized or dropped by its score against the mean of the recent window's L2-normalized
        term vectors; pinned and recent messages stay, and the order is preserved.

        Raises:
            DependencyError: the stemmer package is missing.
        """
        messages = list(self.messages)
        if not messages:
            return messages
        scorable = [index for index, message in enumerate(messages) if not self.is_pinned(message)]
        recent_count = self.recent_turns * 2
        if not scorable or len(scorable) <= recent_count:
            return messages
        if recent_count == 0:
            # Ruby's scorable[0..-1] and scorable[-0..] are both the whole list.
            compressible, recent = scorable, scorable
        else:
            compressible, recent = scorable[:-recent_count], scorable[-recent_count:]

        recent_texts = [
            text
            for text in (message_text(messages[index]) for index in recent)
            if text is not None and len(_ruby.strip(text)) >= MIN_SCORE_LENGTH
        ]
        if not recent_texts:
            return messages

        text_analysis.require_classifier()
        reference = _mean_vector([term_vector(text) for text in recent_texts])
        actions = {index: self._action(reference, messages[index]) for index in compressible}

        result: list[Any] = []
        for index, message in enumerate(messages):
            action = actions.get(index, _KEEP)
            if action is _KEEP:
                result.append(message)
            elif action is not _DROP:
                result.append({"role": message_role(message), "content": action})
        return result

    call = __call__

    def _action(self, reference: dict[str, float], message: object) -> Any:
        text = message_text(message)
        if text is None or len(_ruby.strip(text)) < MIN_SCORE_LENGTH:
            return _KEEP
        score = text_analysis.cosine_similarity(term_vector(text), reference)
        if score >= self.keep_threshold:
            return _KEEP
        if score < self.drop_threshold or self.summarizer is None:
            return _DROP
        summary = self.summarizer(text)
        summary = _ruby.strip("" if summary is None else str(summary))
        return summary if summary else _DROP

    def __repr__(self) -> str:
        return (
            f"HistoryCompressor(messages=<{len(self.messages)}>, recent_turns={self.recent_turns}, "
            f"keep_threshold={self.keep_threshold}, drop_threshold={self.drop_threshold})"
        )


def _mean_vector(vectors: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for vector in vectors:
        for key, value in vector.items():
            total[key] = total.get(key, 0.0) + value
    count = float(len(vectors))
    return {key: value / count for key, value in total.items()}
