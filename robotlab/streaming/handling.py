"""How each consumer of events handles each kind: one table per consumer, checked to name every kind.

A consumer (the Django app's coalescer, its network-task rewriter, the page, each agent protocol) says what it
does with a kind in one function that matches on :data:`~robotlab.streaming.EventKind` and ends with
``assert_never``, so the type checker fails on a kind it does not handle; :func:`handling_table` calls it for every
kind, so a test (or the import) fails too::

    def _page(kind: EventKind) -> Handling[str]:
        match kind:
            case "text.delta":
                return Handled("append", "adds the text to the reply")
            ...
            case "usage.updated":
                return Dropped("the page shows no token counts")
            case _:
                assert_never(kind)

    PAGE = handling_table("page", _page)   # {kind: Handled | Dropped}

A protocol that cannot carry a kind drops it *with a reason*; :func:`consumers` lists every table made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

from .kinds import ALL_EVENTS, EventKind

__all__ = ["Dropped", "Handled", "Handling", "UnhandledEventKindError", "consumers", "handled_kinds",
           "handling_table"]

A = TypeVar("A")
H = TypeVar("H")


@dataclass(frozen=True, slots=True)
class Handled(Generic[A]):
    """The consumer handles the kind: its ``action`` (in the consumer's own terms) and ``how``, in words."""

    action: A
    how: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """The consumer leaves the kind out, for ``reason``."""

    reason: str


#: What one consumer does with one kind.
Handling = Handled[A] | Dropped


class UnhandledEventKindError(AssertionError):
    """A consumer's handling function reached ``assert_never``: a kind it does not handle."""


_CONSUMERS: dict[str, Callable[[EventKind], object]] = {}


def handling_table(consumer: str, decide: Callable[[EventKind], H],
                   kinds: Iterable[str] = ALL_EVENTS) -> dict[str, H]:
    """``{kind: decide(kind)}`` for every kind; ``decide`` is registered as ``consumer``'s (:func:`consumers`).

    Raises:
        UnhandledEventKindError: ``decide`` does not handle a kind (its ``assert_never`` was reached).
    """
    _CONSUMERS.setdefault(consumer, decide)
    table: dict[str, H] = {}
    for kind in kinds:
        try:
            table[kind] = decide(kind)  # type: ignore[arg-type]  # a kind added to kinds in a test, too
        except AssertionError as exc:
            raise UnhandledEventKindError(f"The {consumer} does not handle {kind!r} events: add it to "
                                          f"{decide.__module__}.{decide.__qualname__}.") from exc
    return table


def consumers() -> dict[str, Callable[[EventKind], object]]:
    """Every consumer's handling function, by name, of the tables made so far (their modules imported)."""
    return dict(_CONSUMERS)


def handled_kinds(table: Mapping[str, object]) -> set[str]:
    """The kinds a table of :class:`Handled` and :class:`Dropped` does not drop."""
    return {kind for kind, handling in table.items() if not isinstance(handling, Dropped)}
