"""Searching a conversation's history (:func:`search_history`), and reading its messages' role and text.

Search and compression (:mod:`robotlab.text.compression`) both work on a list of OpenAI-format chat
messages, the form a robot keeps its history in::

    {"role": "system" | "user" | "assistant" | "tool", "content": str | list[part] | None,
     "tool_calls": [...], "tool_call_id": "..."}

A message's text is its ``content`` when that is a string, or the ``"text"`` of each part joined with
spaces when it is a list of parts (parts without text, such as images, are left out); any other
content has no text. Objects with ``role``/``content`` attributes work as well as dicts.

Scores are cosines of stemmed term-frequency vectors (:mod:`robotlab.text.analysis`), without IDF.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from .. import _ruby
from . import analysis as text_analysis

__all__ = [
    "MIN_SCORE_LENGTH",
    "HistoryResult",
    "message_field",
    "message_role",
    "message_text",
    "search_history",
    "term_vector",
]

#: Messages whose text is shorter than this (after stripping) are not scored.
MIN_SCORE_LENGTH = 20


def message_field(message: object, name: str) -> Any:
    """A message's ``name`` field: its key when it is a mapping, else its attribute (``None`` when missing)."""
    if isinstance(message, Mapping):
        return message.get(name)
    return getattr(message, name, None)


def message_role(message: object) -> Any:
    """A message's role as a string (an ``Enum`` role becomes its value)."""
    role = message_field(message, "role")
    return role.value if isinstance(role, Enum) else role


def message_text(message: object) -> str | None:
    """The plain text of a message's content, or ``None`` when it has none (see the module's docs)."""
    content = message_field(message, "content")
    if isinstance(content, str):
        return content
    if isinstance(content, list | tuple):
        texts = []
        for part in content:
            text = part if isinstance(part, str) else message_field(part, "text")
            if text is not None and text is not False:
                texts.append(text if isinstance(text, str) else str(text))
        return " ".join(texts)
    return None


def term_vector(text: str) -> dict[str, float]:
    """The L2-normalized stemmed term frequencies of ``text``."""
    return text_analysis.l2_normalize(text_analysis.word_hash(text))


# --- search --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryResult:
    """One hit of :func:`search_history`."""

    #: The message's text.
    text: str
    #: The message's role: ``"user"``, ``"assistant"``, ``"system"`` or ``"tool"``.
    role: str
    #: Cosine similarity with the query, in (0.0, 1.0].
    score: float
    #: The message's position in the list searched.
    index: int


def search_history(messages: Sequence[Any], query: str, *, limit: int = 5) -> list[HistoryResult]:
    """The messages most relevant to ``query``, best first (Ruby ``Robot#search_history``).

    Every message with at least :data:`MIN_SCORE_LENGTH` characters of text is scored against the
    query; those scoring 0 are left out, the rest sorted by score (ties keep their order) and the
    first ``limit`` returned. A query with no usable term (only stop words, say) finds nothing.

    Typical scores: a direct answer to the query 0.50-0.80, the same topic in other words
    0.20-0.50, unrelated below 0.10.

    Raises:
        ValueError: ``limit`` is negative.
        DependencyError: the stemmer package is missing.
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    text_analysis.require_classifier()
    query_vector = term_vector("" if query is None else str(query))
    if not query_vector:
        return []
    results = []
    for index, message in enumerate(messages):
        text = message_text(message)
        if text is None or len(_ruby.strip(text)) < MIN_SCORE_LENGTH:
            continue
        score = text_analysis.cosine_similarity(query_vector, term_vector(text))
        if score == 0:
            continue
        results.append(HistoryResult(text=text, role=message_role(message), score=score, index=index))
    results.sort(key=lambda result: -result.score)
    return results[:limit]
