"""MemoryChange: robotlab.memory.changes."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from robotlab.memory import MemoryChange

# ---- MemoryChange -------------------------------------------------------------------------


def test_memory_change_predicates() -> None:
    created = MemoryChange(key="k", value=1)
    assert created.is_created and not created.is_updated and not created.is_deleted
    updated = MemoryChange(key="k", value=2, previous=1)
    assert updated.is_updated and not updated.is_created and not updated.is_deleted
    deleted = MemoryChange(key="k", value=None, previous=2)
    assert deleted.is_deleted and not deleted.is_created and not deleted.is_updated
    neither = MemoryChange(key="k", value=None)
    assert not (neither.is_created or neither.is_updated or neither.is_deleted)
    falsy = MemoryChange(key="k", value=0, previous=False)
    assert falsy.is_updated


def test_memory_change_fields_and_defaults() -> None:
    change = MemoryChange("k", 1, None, "writer", "net")
    assert (change.key, change.value, change.previous, change.writer, change.network_name) == (
        "k", 1, None, "writer", "net")
    assert change.correlation_id is None
    assert change.timestamp.tzinfo is not None
    assert datetime.now(UTC) - change.timestamp < timedelta(minutes=1)
    naive = MemoryChange(key="k", value=1, timestamp=datetime(2025, 1, 1, 12, 0, 0))
    assert naive.timestamp == datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.value = 2  # type: ignore[misc]


def test_memory_change_to_dict_drops_none_and_uses_iso8601() -> None:
    moment = datetime(2025, 3, 4, 5, 6, 7, 123456, tzinfo=UTC)
    change = MemoryChange(key="k", value={"a": 1}, writer="bot", timestamp=moment)
    assert change.to_dict() == {"key": "k", "value": {"a": 1}, "writer": "bot",
                                "timestamp": "2025-03-04T05:06:07+00:00"}
    assert json.loads(change.to_json()) == change.to_dict()
    assert change.to_json() == ('{"key":"k","value":{"a":1},"writer":"bot",'
                                '"timestamp":"2025-03-04T05:06:07+00:00"}')
    offset = MemoryChange(key="k", value=1, timestamp=moment.astimezone(timezone(timedelta(hours=2))))
    assert offset.to_dict()["timestamp"] == "2025-03-04T07:06:07+02:00"


def test_memory_change_from_dict_round_trip() -> None:
    moment = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    change = MemoryChange(key="k", value=2, previous=1, writer="a", network_name="n", timestamp=moment,
                          correlation_id="c-1")
    assert MemoryChange.from_dict(change.to_dict()) == change
    assert MemoryChange.from_dict(json.loads(change.to_json())) == change
    bare = MemoryChange.from_dict({"key": "k"})
    assert bare.value is None and bare.timestamp.tzinfo is not None
