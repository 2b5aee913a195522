"""Where an AG-UI stream is: the SSE id of every event it sends, from which a reconnect replays the rest exactly.

A stream's events are made from the run's stored events (:class:`~robotlab_django.agui.translate.Translator`), so a
place in it is a place in those: :class:`Position` names the run, ``after`` (the stored event a resumed run's stream
starts after; ``0`` for a new run), the group of the event (``s``: the start, before any stored event; ``e``: the
events made from one stored event; ``f``: the end, from the settled row), how many events of that group were sent
up to and including it, and ``seen``: the last stored event sent of each row (the run's, and its network tasks'
rows), the one the group was made from first. Each row's events are read in order, but the rows of a distributed
network turn commit side by side, so one number would not say which of them were sent.

The id is ``<run id>:<after>:<group><count>:<row>-<event>,...``, e.g. ``3f2b...9c:0:e2:17-5102``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["END", "EVENT", "MAX_ROWS", "START", "Position"]

#: The groups of a stream: its start, the events of one stored event, its end.
START, EVENT, END = "s", "e", "f"
#: The most rows an id names (a network turn's tasks, with room to spare).
MAX_ROWS = 500

_ID = re.compile(r"(?P<run>[0-9a-f]{32}):(?P<after>\d{1,18}):(?P<group>[sef])(?P<count>\d{1,6}):"
                 r"(?P<seen>(?:\d{1,18}-\d{1,18})(?:,\d{1,18}-\d{1,18})*)?")


@dataclass(frozen=True)
class Position:
    """The place of one event in an AG-UI stream (see the module docs)."""

    run_id: str
    after: int
    group: str
    count: int
    seen: tuple[tuple[int, int], ...] = ()

    def __str__(self) -> str:
        pairs = ",".join(f"{row}-{event}" for row, event in self.seen)
        return f"{self.run_id}:{self.after}:{self.group}{self.count}:{pairs}"

    @property
    def current(self) -> tuple[int, int] | None:
        """The row and stored event the event's group was made from (``None`` outside group ``e``)."""
        return self.seen[0] if self.group == EVENT and self.seen else None

    def seen_map(self) -> dict[int, int]:
        """``seen`` as ``{row: last stored event sent}``."""
        return dict(self.seen)

    @classmethod
    def parse(cls, text: str) -> Position:
        """The position an SSE id (a ``Last-Event-ID``) names.

        Raises:
            ValueError: it is no id this server sends (the message says what one looks like).
        """
        found = _ID.fullmatch(text.strip())
        pairs = found.group("seen") if found else None
        seen = tuple((int(row), int(event)) for row, _, event in
                     (pair.partition("-") for pair in pairs.split(","))) if pairs else ()
        rows = [row for row, _ in seen]
        if (found is None or len(seen) > MAX_ROWS or len(set(rows)) != len(rows)
                or (found.group("group") == EVENT and not seen)):
            raise ValueError("Last-Event-ID is not an id of this server's AG-UI events (they look like "
                             "'<run id>:<after>:<group><count>:<row>-<event>,...'); reconnect with the id of the last "
                             "event received.")
        return cls(found.group("run"), int(found.group("after")), found.group("group"), int(found.group("count")),
                   seen)
