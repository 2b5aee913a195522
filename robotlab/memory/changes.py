"""The record of one memory write: :class:`MemoryChange`, as subscription callbacks receive it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..messages import _compact, _dumps, _iso8601

__all__ = ["ChangeListener", "MemoryChange"]


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class MemoryChange:
    """One change of a memory key, as given to subscription callbacks.

    Attributes:
        key: the key that changed.
        value: the new value.
        previous: the value before (``None`` when the key was created).
        writer: the robot that wrote it (``memory.current_writer`` at the time), if any.
        network_name: the network owning the memory, if any.
        timestamp: when it changed (an aware ``datetime``; defaults to now, UTC; a naive time is
            taken as UTC).
        correlation_id: an optional id for tracing.
    """

    key: str
    value: Any
    previous: Any = None
    writer: str | None = None
    network_name: str | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    correlation_id: str | None = None

    def __post_init__(self) -> None:
        moment: Any = self.timestamp
        if moment is None:
            moment = datetime.now(UTC)
        elif isinstance(moment, str):
            moment = datetime.fromisoformat(moment)
        object.__setattr__(self, "timestamp", _utc(moment))

    @property
    def is_created(self) -> bool:
        """A new value where there was none (``previous`` is ``None``, ``value`` is not)."""
        return self.previous is None and self.value is not None

    @property
    def is_updated(self) -> bool:
        """An existing value replaced (neither ``previous`` nor ``value`` is ``None``)."""
        return self.previous is not None and self.value is not None

    @property
    def is_deleted(self) -> bool:
        """A value removed (``value`` is ``None``, ``previous`` is not)."""
        return self.value is None and self.previous is not None

    def to_dict(self) -> dict[str, Any]:
        """The fields with ``None`` dropped; ``timestamp`` as ISO 8601 (seconds, with offset)."""
        return _compact(
            {
                "key": self.key,
                "value": self.value,
                "previous": self.previous,
                "writer": self.writer,
                "network_name": self.network_name,
                "timestamp": _iso8601(self.timestamp),
                "correlation_id": self.correlation_id,
            }
        )

    def to_json(self) -> str:
        """:meth:`to_dict` as compact JSON."""
        return _dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryChange:
        """Rebuild a change from :meth:`to_dict` output (a missing timestamp becomes now)."""
        timestamp = data.get("timestamp")
        return cls(
            key=data["key"],
            value=data.get("value"),
            previous=data.get("previous"),
            writer=data.get("writer"),
            network_name=data.get("network_name"),
            timestamp=datetime.fromisoformat(timestamp) if timestamp else datetime.now(UTC),
            correlation_id=data.get("correlation_id"),
        )


#: What hears another process's changes: called with each change, or ``None`` when changes may have been missed.
ChangeListener = Callable[[MemoryChange | None], None]
