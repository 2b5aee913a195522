"""The event of a run as it travels, its typed form, and the chunks ``on_content`` receives.

Every :class:`Event` has a ``kind`` (RobotLab's ``Streaming::Events`` names), the ``run_id``, a ``seq`` that grows
by one per event of a run, a ``ts`` (Unix seconds) and a ``data`` payload. ``event.to_dict()`` is the JSON that
crosses process boundaries, websockets, the database and the agent protocols: ``{"kind", "run_id", "seq", "ts",
**data}``.

:meth:`Event.typed` (and :func:`parse_event`, from an event or its dict) gives the same event as the typed class of
its kind (:mod:`robotlab.streaming.typed`), whose fields say what the kind carries; :class:`TypedEvent` is their
base, and its ``to_dict`` is the event's, the same dict, key for key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar, cast

from .._record import Record
from .kinds import EventKind

if TYPE_CHECKING:
    from .typed import StreamEvent

__all__ = ["Chunk", "Event", "OtherEvent", "TypedEvent", "event_type", "optional", "parse_event", "register"]

_ENVELOPE = frozenset({"kind", "run_id", "seq", "ts"})
_NOT_PAYLOAD = frozenset({"kind", "run_id", "seq", "ts", "extra", "_source"})
_OPTIONAL = "robotlab.optional"


@dataclass(frozen=True, slots=True)
class Event(Record):
    """One streaming event of a run, told apart by its ``kind``.

    ``to_dict()`` is ``{"kind", "run_id", "seq", "ts", **data}``, the JSON sent over the wire, and
    ``Event.from_dict`` reads it back (the keys other than the first four are the ``data``).
    ``kind`` is one of :data:`EventKind`, or a kind an extension adds: it is typed
    ``EventKind | str`` (so code passing a plain string type-checks) and not checked at run time;
    :func:`is_valid` tells the known ones. :meth:`typed` gives the event as its kind's class.

    Events are created once per streamed token, so this is a frozen slotted dataclass, not a
    pydantic model. Measured on the 2-core development machine (CPU time, best of 7 rounds of
    100,000, main and this module interleaved in one process): creating an event takes about
    1.0 us, as before this module moved to the shared serializer, against 1.5-2.0 us for a frozen
    pydantic model of the same fields; ``to_dict()`` takes about 0.9 us (0.16 us when it was
    written out by hand), and it runs once per coalesced batch, not per token. :meth:`typed` builds a
    frozen dataclass of about ten fields (a few microseconds): it is for consumers that read fields, while the
    per-token paths (the Django app's coalescer and network rewriter) look the kind up in their tables.
    """

    _wire: ClassVar[tuple[str, ...]] = ("kind", "run_id", "seq", "ts")
    _spread: ClassVar[str | None] = "data"

    kind: EventKind | str
    run_id: str
    seq: int
    ts: float
    data: dict[str, Any] = field(default_factory=dict)

    def typed(self) -> StreamEvent:
        """This event as the typed class of its kind (:class:`OtherEvent` for a kind no class names)."""
        return _typed(self.kind, self.run_id, self.seq, self.ts, self.data)


@dataclass(frozen=True, slots=True)
class Chunk(Record):
    """A piece of streamed model text, as given to ``on_content`` callbacks."""

    _wire: ClassVar[tuple[str, ...]] = ("content", "thinking")

    content: str
    thinking: str | None = None

    def __str__(self) -> str:
        return self.content


def optional() -> Any:
    """A payload field, ``None`` by default, left out of a built event's dict while ``None``.

    A field declared without it is always in the dict, ``None`` or not.
    """
    return field(default=None, metadata={_OPTIONAL: True})


@dataclass(frozen=True, slots=True, kw_only=True)
class TypedEvent:
    """The base of the typed events: the envelope, the network tags, and the keys the kind does not name.

    Each kind's class (:mod:`robotlab.streaming.typed`) adds the fields its payload carries. ``network``, ``task``
    and ``robot`` say where the event comes from: a robot's own ``run.*`` events name the ``robot``, a network's
    its ``network``, and every event of a network's task carries all three (``task``: the task's name).
    ``extra`` holds the payload keys the class does not name (an extension's, or ``cursor`` and ``result_id``
    added by the Django app's stored events). Values are kept as they came, not converted.

    ``to_dict()`` is the :class:`Event` wire dict. An event read from a dict or an :class:`Event` gives back
    exactly that dict (its key order and its ``None`` values); one built from fields lists the tags, then the
    kind's fields in their order (an :func:`optional` one only when set), then ``extra``.
    """

    kind: str = field(default="", init=False)
    run_id: str
    seq: int
    ts: float
    network: str | None = optional()
    task: str | None = optional()
    robot: str | None = optional()
    extra: Mapping[str, Any] = field(default_factory=dict)
    _source: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def payload(self) -> dict[str, Any]:
        """The event's ``data``: every key of its dict but the envelope (``kind``, ``run_id``, ``seq``, ``ts``)."""
        if self._source is not None:
            return dict(self._source)
        data: dict[str, Any] = {}
        for name, is_optional in _layout(type(self)):
            value = getattr(self, name)
            if value is not None or not is_optional:
                data[name] = value
        data.update(self.extra)
        return data

    def to_event(self) -> Event:
        """The :class:`Event` this is (the form emitters send and the stream stores)."""
        return Event(kind=self.kind, run_id=self.run_id, seq=self.seq, ts=self.ts, data=self.payload())

    def to_dict(self) -> dict[str, Any]:
        """The wire dict: ``{"kind", "run_id", "seq", "ts", **payload}`` (:meth:`Event.to_dict`)."""
        return self.to_event().to_dict()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """Read an event's wire dict (raises ``ValueError`` when its kind is not this class's)."""
        return cls._checked(parse_event(data))

    @classmethod
    def from_event(cls, event: Event) -> Self:
        """Read an :class:`Event` (raises ``ValueError`` when its kind is not this class's)."""
        return cls._checked(event.typed())

    @classmethod
    def _checked(cls, event: object) -> Self:
        if not isinstance(event, cls):
            raise ValueError(f"A {getattr(event, 'kind', '?')!r} event is no {cls.__name__}.")
        return event


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherEvent(TypedEvent):
    """An event of a kind no class names (an extension's): its kind, and its whole payload in ``extra``."""

    kind: str  # a field of its own here: any string


#: The class of each kind, filled by :func:`register` (:mod:`robotlab.streaming.typed`).
_TYPES: dict[str, type[TypedEvent]] = {}
_LAYOUTS: dict[type[TypedEvent], tuple[tuple[str, bool], ...]] = {}
_NAMES: dict[type[TypedEvent], frozenset[str]] = {}

E = TypeVar("E", bound=type[TypedEvent])


def register(cls: E) -> E:
    """Make ``cls`` (a :class:`TypedEvent` dataclass whose ``kind`` field defaults to its kind) its kind's class."""
    kind = cls.__dataclass_fields__["kind"].default
    if not isinstance(kind, str) or not kind or kind in _TYPES:
        raise ValueError(f"{cls.__name__} names no kind of its own ({kind!r}).")
    _TYPES[kind] = cls
    return cls


def event_type(kind: str) -> type[TypedEvent]:
    """The typed class of ``kind``: its registered class, or :class:`OtherEvent`."""
    return _TYPES.get(kind, OtherEvent)


def _layout(cls: type[TypedEvent]) -> tuple[tuple[str, bool], ...]:
    """``(name, optional)`` of each payload field of ``cls``, in order (the tags first)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = tuple((f.name, bool(f.metadata.get(_OPTIONAL))) for f in dataclasses.fields(cls)
                       if f.name not in _NOT_PAYLOAD)
        _LAYOUTS[cls] = layout
        _NAMES[cls] = frozenset(name for name, _ in layout)
    return layout


def _typed(kind: str, run_id: str, seq: int, ts: float, data: Mapping[str, Any]) -> StreamEvent:
    cls = _TYPES.get(kind, OtherEvent)
    names = _NAMES.get(cls)
    if names is None:
        _layout(cls)
        names = _NAMES[cls]
    known: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, value in data.items():
        if key in names:
            known[key] = value
        else:
            extra[key] = value
    if cls is OtherEvent:
        event: TypedEvent = OtherEvent(kind=kind, run_id=run_id, seq=seq, ts=ts, extra=extra, **known)
    else:
        event = cls(run_id=run_id, seq=seq, ts=ts, extra=extra, **known)
    object.__setattr__(event, "_source", dict(data))
    return cast("StreamEvent", event)


def parse_event(value: Event | Mapping[str, Any]) -> StreamEvent:
    """An event, or its wire dict (a stored ``RunEvent``'s, a frame's), as the typed class of its kind.

    Keys other than the envelope and the class's fields go to ``extra``; nothing is converted or checked, so
    events stored before a field was added read back too.
    """
    if isinstance(value, Event):
        return value.typed()
    payload = {key: item for key, item in value.items() if key not in _ENVELOPE}
    return _typed(str(value.get("kind", "")), value.get("run_id", ""), value.get("seq", 0), value.get("ts", 0.0),
                  payload)
