"""The text a run streamed, attempt by attempt: what a cancelled run keeps, and what a protocol stream sends.

A run executed again (its worker was lost) streams its text again from the start: its events after the new
attempt's start replace the old attempt's. An attempt starts at a ``run.started`` of the row's own run (not a
network task's robot, whose ``run.started`` carries ``task``) or, on a task row of a distributed network turn,
at its task's ``step.started``. The text is kept per *part*: the row (``result_id``) and the task (``""``
outside a network), as a network's tasks stream side by side.

:func:`attempt_texts` replays stored events into the last attempt's text of each part (a cancelled run's reply:
:func:`robotlab_django.runs.watch.streamed_reply`). :class:`StreamedText` is a protocol stream's side: a stream
cannot take back what it sent, so the text of a new attempt is withheld and compared with what the stream
already sent for that part. While it repeats it, nothing is sent; once it goes past it, only the new text is
sent; if it says something else (a model that answers the step in flight differently), the part's whole text
is sent again as a replacement; and when the stream ends, a part whose last attempt said less than was sent is
replaced by what it said. So a client that appends chunks and applies replacements ends with exactly the
stored text of every part.

Each protocol says what it does with every kind in a table of :func:`robotlab.streaming.handling_table`: a kind it
bridges through :class:`StreamedText` is :class:`Streamed` ``TEXT`` (a ``text.delta``) or ``ATTEMPT`` (the start
of an attempt), as :data:`STREAMED` says; any other kind it drops, with its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, NamedTuple

from robotlab.streaming import (
    RUN_STARTED,
    STEP_STARTED,
    TEXT_DELTA,
    Dropped,
    EventKind,
    Handled,
    Handling,
    handling_table,
)

__all__ = ["STREAMED", "Chunk", "Part", "Streamed", "StreamedText", "attempt_texts", "bridge_table",
           "starts_attempt"]


class Streamed(Enum):
    """What :class:`StreamedText` does with a kind a protocol bridges through it."""

    TEXT = "text"
    """Its text is sent (a ``text.delta``)."""
    ATTEMPT = "attempt"
    """It may start an attempt of its row (:func:`starts_attempt`): the text after it is compared with what was sent."""


#: The kinds :class:`StreamedText` bridges, and how; a protocol's table may bridge these, and only so.
STREAMED: dict[str, Streamed] = {RUN_STARTED: Streamed.ATTEMPT, STEP_STARTED: Streamed.ATTEMPT,
                                 TEXT_DELTA: Streamed.TEXT}

#: A part of a run's text: the row that stored it (``result_id``) and the network task (``""`` without one).
Part = tuple[Any, str]


class Chunk(NamedTuple):
    """Text a protocol stream sends: appended to the ``task``'s part (``""``: the run's own), or replacing it."""

    task: str
    text: str
    replace: bool = False


def bridge_table(protocol: str, decide: Callable[[EventKind], Handling[Streamed]]) -> dict[str, Handling[Streamed]]:
    """``protocol``'s table of every kind (:func:`~robotlab.streaming.handling_table`), held to :data:`STREAMED`.

    Raises:
        ValueError: it bridges a kind :class:`StreamedText` does not, or not as it does.
    """
    table = handling_table(protocol, decide)
    wrong = sorted(kind for kind, handling in table.items()
                   if isinstance(handling, Handled) and STREAMED.get(kind) is not handling.action)
    if wrong:
        raise ValueError(f"The {protocol} bridges {wrong} otherwise than StreamedText can: bridge them there first.")
    return table


_UNNAMED = Dropped("a kind the protocol's table does not name")


def starts_attempt(event: Mapping[str, Any], turn_row: int | None = None) -> bool:
    """Whether ``event`` (a stored event's dict with ``result_id``) starts an attempt of its row.

    ``turn_row``: the primary key of the row being followed, when its task rows' events are followed too; a
    ``step.started`` on one of those task rows starts the task row's attempt.
    """
    if event.get("kind") == RUN_STARTED:
        return "task" not in event
    return (event.get("kind") == STEP_STARTED and turn_row is not None
            and event.get("result_id") not in (None, turn_row))


def _part(event: Mapping[str, Any]) -> Part:
    return event.get("result_id"), str(event.get("task") or "")


def attempt_texts(events: Iterable[Mapping[str, Any]],
                  turn_row: int | None = None) -> tuple[dict[Part, str], Part | None]:
    """The last attempt's text of each part of ``events`` (stored order), and the part of the last ``step.started``.

    ``turn_row`` is the followed row when ``events`` include its task rows' (see :func:`starts_attempt`).
    """
    texts: dict[Part, str] = {}
    last_step: Part | None = None
    for event in events:
        if starts_attempt(event, turn_row):
            row = event.get("result_id")
            texts = {part: text for part, text in texts.items() if part[0] != row}
        if event.get("kind") == STEP_STARTED and event.get("task"):
            last_step = _part(event)
        elif event.get("kind") == TEXT_DELTA and event.get("text"):
            part = _part(event)
            texts[part] = texts.get(part, "") + str(event["text"])
    return texts, last_step


class StreamedText:
    """What a protocol stream sends of a run's text deltas, so that a lost worker's attempt is not sent twice.

    Feed it the followed events (:func:`robotlab_django.protocols.runs.afollow_events`) in order; send the chunks
    it returns, then those of :meth:`close` (see the module docs).

    Args:
        turn_row: The followed row's primary key when its task rows are followed with it (a network turn).
        bridged: The protocol's table: a kind it drops (or does not name) is not looked at. By default the kinds
            of :data:`STREAMED`.
    """

    def __init__(self, turn_row: int | None = None, bridged: Mapping[str, Handling[Streamed]] | None = None) -> None:
        self.turn_row = turn_row
        self.bridged: Mapping[str, Handling[Streamed]] = bridged if bridged is not None else {
            kind: Handled(action, "bridged") for kind, action in STREAMED.items()}
        self._sent: dict[Part, str] = {}
        self._again: dict[Part, str] = {}
        self._started: set[Any] = set()

    def feed(self, event: Mapping[str, Any]) -> list[Chunk]:
        """The chunks to send for ``event`` (none but for a text delta that is new to the stream)."""
        if isinstance(self.bridged.get(str(event.get("kind")), _UNNAMED), Dropped):
            return []
        if starts_attempt(event, self.turn_row):
            row = event.get("result_id")
            if row in self._started:  # a new attempt: compare its text with what was sent
                self._again.update({part: "" for part in self._sent if part[0] == row})
            self._started.add(row)
            return []
        if event.get("kind") != TEXT_DELTA or not event.get("text"):
            return []
        part, text = _part(event), str(event["text"])
        if part not in self._again:
            self._sent[part] = self._sent.get(part, "") + text
            return [Chunk(part[1], text)]
        said = self._again[part] + text
        sent = self._sent[part]
        if sent.startswith(said):  # the new attempt repeats what was sent: nothing new yet
            self._again[part] = said
            return []
        del self._again[part]
        self._sent[part] = said
        if said.startswith(sent):  # it went past what was sent: only the rest
            return [Chunk(part[1], said[len(sent):])]
        return [Chunk(part[1], said, replace=True)]

    def close(self) -> list[Chunk]:
        """The replacements of the parts whose last attempt said less than the stream sent (the stream ended)."""
        chunks = [Chunk(part[1], said, replace=True) for part, said in self._again.items() if said != self._sent[part]]
        for part, said in self._again.items():
            self._sent[part] = said
        self._again.clear()
        return chunks
