"""StateProxy (memory.data): robotlab.memory.state."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from robotlab.memory import StateProxy

# ---- StateProxy ---------------------------------------------------------------------------


def test_state_proxy_item_and_attribute_access() -> None:
    proxy = StateProxy({"count": 0, "name": "test"})
    assert proxy["count"] == 0
    assert proxy.name == "test"
    proxy.count = 1
    proxy["extra"] = None
    assert proxy.to_dict() == {"count": 1, "name": "test", "extra": None}
    assert proxy.extra is None
    with pytest.raises(AttributeError, match="missing"):
        _ = proxy.missing
    assert proxy["missing"] is None  # RobotLab's StateProxy reads a missing key as nil
    assert "missing" not in proxy  # reading it does not create it
    assert proxy.get("missing") is None and proxy.get("missing", 7) == 7
    with pytest.raises(KeyError):
        proxy.pop("missing")
    assert proxy.pop("missing", 3) == 3 and proxy.setdefault("fresh", 5) == 5 and proxy.pop("fresh") == 5
    assert "count" in proxy and proxy.has_key("count") and not proxy.has_key("missing")
    assert len(proxy) == 3 and not proxy.is_empty
    assert StateProxy().is_empty and StateProxy(None).to_dict() == {}
    assert list(proxy.keys()) == ["count", "name", "extra"]
    assert list(proxy.values()) == [1, "test", None]
    assert dict(proxy.items()) == proxy.to_dict()
    assert proxy == {"count": 1, "name": "test", "extra": None}
    del proxy.extra
    assert "extra" not in proxy
    with pytest.raises(AttributeError):
        del proxy.extra


def test_state_proxy_keys_must_be_strings() -> None:
    with pytest.raises(TypeError, match="Memory keys must be str"):
        StateProxy({1: "x"})  # type: ignore[dict-item]
    with pytest.raises(TypeError):
        StateProxy()[2] = "x"  # type: ignore[index]


def test_state_proxy_on_change_only_when_the_value_changes() -> None:
    changes: list[tuple[str, Any, Any]] = []
    proxy = StateProxy({"a": 1}, on_change=lambda key, old, new: changes.append((key, old, new)))
    proxy["a"] = 1  # same value: nothing
    proxy["a"] = 2
    proxy.b = "x"
    proxy["c"] = None  # None over "missing" (None): nothing, as in RobotLab
    proxy.delete("b")  # deletes never call on_change
    assert proxy.merge({"a": 3, "d": 4}) is proxy
    assert changes == [("a", 1, 2), ("b", None, "x"), ("a", 2, 3), ("d", None, 4)]


def test_state_proxy_delete_returns_the_value() -> None:
    proxy = StateProxy({"a": 1})
    assert proxy.delete("a") == 1
    assert proxy.delete("a") is None
    assert proxy.is_empty


def test_state_proxy_copies() -> None:
    calls: list[str] = []
    source = {"nested": {"list": [1]}}
    proxy = StateProxy(source, on_change=lambda key, old, new: calls.append(key))
    proxy["nested"]["list"].append(2)
    assert source["nested"]["list"] == [1, 2]  # the constructor copies shallowly, like Ruby
    plain = proxy.to_dict()
    plain["other"] = 1
    assert "other" not in proxy
    deep = proxy.copy()
    deep["nested"]["list"].append(3)
    assert proxy["nested"]["list"] == [1, 2]
    deep["x"] = 1
    assert calls == ["x"]  # the copy keeps on_change
    assert copy.deepcopy(proxy) == proxy and copy.deepcopy(proxy)["nested"] is not proxy["nested"]
    assert copy.copy(proxy)["nested"] is proxy["nested"]
    assert repr(StateProxy({"a": 1})) == "StateProxy({'a': 1})"
