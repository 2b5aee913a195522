"""Memory itself: construction, reserved keys, custom keys, history, serialization (robotlab.memory.store)."""

from __future__ import annotations

import copy
import json

import pytest

from robotlab.memory import RESERVED_KEYS, Memory, MemoryChange, ResponseCache, StateProxy, create_memory
from robotlab.messages import Message, TextMessage
from robotlab.result import RobotResult
from tests.robotlab.memory.helpers import answer, result

# ---- construction, reserved keys ----------------------------------------------------------


def test_reserved_keys() -> None:
    assert RESERVED_KEYS == ("data", "results", "messages", "session_id", "cache")


def test_defaults() -> None:
    memory = Memory()
    assert isinstance(memory.data, StateProxy) and memory.data.is_empty
    assert memory.results == [] and memory.messages == []
    assert memory.session_id is None and memory.network_name is None and memory.current_writer is None
    assert isinstance(memory.cache, ResponseCache) and memory.enable_cache
    assert not memory.is_redis
    assert memory.keys() == [] and memory.all_keys() == list(RESERVED_KEYS)


def test_constructor_arguments() -> None:
    memory = Memory(data={"tier": "gold"}, results=[result()], messages=[{"role": "user", "content": "hi"}],
                    session_id="s-1", enable_cache=False, network_name="support")
    assert memory.data.tier == "gold"
    assert [r.robot_name for r in memory.results] == ["helper"]
    assert memory.messages == [TextMessage(role="user", content="hi")]
    assert memory.session_id == "s-1" and memory.network_name == "support"
    assert memory.cache is None and not memory.enable_cache
    with pytest.raises(AttributeError):
        memory.network_name = "other"  # type: ignore[misc]


def test_create_memory_factory() -> None:
    memory = create_memory(data={"a": 1}, enable_cache=False, network_name="n", session_id="s")
    assert isinstance(memory, Memory)
    assert memory.data.to_dict() == {"a": 1}
    assert memory.cache is None and memory.network_name == "n" and memory.session_id == "s"
    assert create_memory().data.to_dict() == {}


def test_data_assignment_replaces_the_proxy_silently() -> None:
    memory = Memory(data={"a": 1})
    seen: list[MemoryChange] = []
    memory.subscribe("data", callback=seen.append)
    memory.subscribe_pattern("*", callback=seen.append)
    first = memory.data
    memory["data"] = {"b": 2}
    assert memory.data is not first and memory.data.to_dict() == {"b": 2}
    assert memory["data"] is memory.data and memory.get("data") is memory.data
    memory.data = {"c": 3}
    assert memory.data.c == 3
    memory["data"] = None
    assert memory.data.to_dict() == {}
    with pytest.raises(TypeError, match="data must be a mapping"):
        memory["data"] = [1, 2]
    assert seen == []


def test_data_writes_are_not_reactive() -> None:
    memory = Memory()
    seen: list[MemoryChange] = []
    memory.subscribe("category", "data", callback=seen.append)
    memory.subscribe_pattern("*", callback=seen.append)
    memory.data["category"] = "billing"
    memory.data.resolved = True
    memory.data.merge({"x": 1})
    assert memory.data.category == "billing"
    assert seen == []
    assert memory.get("category") is None and not memory.has_key("category")
    assert memory.to_dict()["data"] == {"category": "billing", "resolved": True, "x": 1}


def test_results_and_messages_are_normalized_to_lists() -> None:
    memory = Memory()
    one = result()
    memory["results"] = one
    assert memory.results == [one]
    memory["results"] = None
    assert memory.results == []
    memory["results"] = [one.export()]
    assert isinstance(memory.results[0], RobotResult) and memory.results[0].checksum == one.checksum
    memory.results = (one, one)
    assert memory.results == [one, one]

    memory["messages"] = {"role": "user", "content": "hi"}
    assert memory.messages == [TextMessage(role="user", content="hi")]
    memory["messages"] = [answer(), {"type": "text", "role": "assistant", "content": "x"}]
    assert [type(m) for m in memory.messages] == [TextMessage, TextMessage]
    memory.messages = None
    assert memory.messages == []
    with pytest.raises(TypeError, match="Invalid message: must be Message or Hash"):
        memory["messages"] = [42]
    with pytest.raises(TypeError, match="Invalid message: must be Message or Hash"):
        Memory(messages=["hello"])  # type: ignore[list-item]


def test_results_and_messages_are_copies() -> None:
    memory = Memory(results=[result()], messages=[answer()])
    memory.results.append(result("other"))
    memory.messages.clear()
    assert len(memory.results) == 1 and len(memory.messages) == 1


def test_session_id() -> None:
    memory = Memory()
    memory["session_id"] = "abc"
    assert memory.session_id == "abc" and memory["session_id"] == "abc"
    memory.session_id = "def"
    assert memory.get("session_id") == "def"


def test_cache_cannot_be_reassigned() -> None:
    memory = Memory()
    with pytest.raises(ValueError, match="^Cannot reassign cache - it is initialized automatically$"):
        memory["cache"] = {}
    with pytest.raises(ValueError, match="^Cannot reassign cache - it is initialized automatically$"):
        memory.set("cache", {})
    with pytest.raises(ValueError, match="Cannot reassign cache"):
        memory.merge({"cache": None})
    assert memory["cache"] is memory.cache is Memory().cache  # one cache for the process
    assert Memory(enable_cache=False)["cache"] is None



def test_reserved_keys_always_exist_and_cannot_be_deleted() -> None:
    memory = Memory()
    for key in RESERVED_KEYS:
        assert memory.has_key(key) and key in memory
        with pytest.raises(ValueError, match=f"^Cannot delete reserved key: {key}$"):
            memory.delete(key)
    assert not memory.has_key("custom") and "custom" not in memory


def test_keys_must_be_strings() -> None:
    memory = Memory()
    for call in (lambda: memory.set(1, "x"), lambda: memory.get(1), lambda: memory[1],  # type: ignore
                 lambda: memory.has_key(1), lambda: 1 in memory, lambda: memory.delete(1),  # type: ignore
                 lambda: memory.subscribe(1, callback=print)):
        with pytest.raises(TypeError, match="Memory keys must be str"):
            call()
    with pytest.raises(TypeError, match="at least one key"):
        memory.get()  # type: ignore[call-overload]
    with pytest.raises(TypeError):
        iter(memory)  # type: ignore[call-overload]


# ---- custom keys --------------------------------------------------------------------------


def test_set_and_get() -> None:
    memory = Memory()
    value = {"score": 0.8}
    assert memory.set("sentiment", value) is value
    assert memory.get("sentiment") is value
    assert memory["sentiment"] is value
    assert memory.get("missing") is None and memory["missing"] is None
    memory["entities"] = ["a"]
    # several keys: only the keys present, as in RobotLab (a key set to None is present)
    assert memory.get("sentiment", "entities", "missing") == {"sentiment": value, "entities": ["a"]}
    memory.set("empty", None)
    assert memory.get("missing", "empty") == {"empty": None}
    assert list(memory.get("entities", "sentiment")) == ["entities", "sentiment"]
    assert memory.get("data", "sentiment") == {"data": memory.data, "sentiment": value}


def test_keys_delete_clear_reset() -> None:
    memory = Memory(data={"a": 1}, results=[result()], messages=[answer()], session_id="s")
    memory.set("b", 2)
    memory.set("a", 1)
    assert memory.keys() == ["b", "a"]
    assert memory.all_keys() == [*RESERVED_KEYS, "b", "a"]
    assert memory.delete("b") == 2 and memory.delete("b") is None
    assert memory.keys() == ["a"]
    assert memory.clear() is memory
    assert memory.keys() == [] and memory.data.a == 1 and memory.session_id == "s"
    memory.set("c", 3)
    cache, data = memory.cache, memory.data
    assert memory.reset() is memory
    assert memory.keys() == [] and memory.data.to_dict() == {} and memory.data is not data
    assert memory.results == [] and memory.messages == [] and memory.session_id is None
    assert memory.cache is cache


def test_merge() -> None:
    memory = Memory()
    seen: list[str] = []
    memory.subscribe_pattern("*", callback=lambda change: seen.append(change.key))
    assert memory.merge({"a": 1, "session_id": "s", "data": {"d": 1}, "b": 2}) is memory
    assert memory.get("a", "b") == {"a": 1, "b": 2}
    assert memory.session_id == "s" and memory.data.d == 1
    assert seen == ["a", "b"]  # reserved keys are assigned silently


# ---- history ------------------------------------------------------------------------------


def test_results_history_helpers() -> None:
    memory = Memory()
    first, second = result("a"), result("b")
    assert memory.append_result(first) is memory
    memory.append_result(second.export())
    assert [r.robot_name for r in memory.results] == ["a", "b"]
    assert [r.robot_name for r in memory.results_from(1)] == ["b"]
    assert memory.results_from(2) == [] and memory.results_from(10) == []
    assert memory.set_results([second]) is memory
    assert memory.results == [second]


def test_format_history() -> None:
    greeting = TextMessage(role="user", content="hello")
    one = result("a", "first")
    memory = Memory(messages=[greeting], results=[one])
    history = memory.format_history()
    assert history == [greeting, *one.output, *one.tool_calls]
    assert memory.format_history(formatter=lambda r: [r.robot_name]) == [greeting, "a"]


# ---- serialization and copies -------------------------------------------------------------


def test_to_dict_drops_session_id_when_none() -> None:
    memory = Memory(data={"a": 1})
    assert memory.to_dict() == {"data": {"a": 1}, "results": [], "messages": [], "custom": {}}
    one = result()
    memory = Memory(data={"a": 1}, results=[one], messages=[answer()], session_id="s")
    memory.set("k", [1, 2])
    assert memory.to_dict() == {
        "data": {"a": 1},
        "results": [one.export()],
        "messages": [answer().to_dict()],
        "session_id": "s",
        "custom": {"k": [1, 2]},
    }
    assert list(memory.to_dict()) == ["data", "results", "messages", "session_id", "custom"]
    assert json.loads(memory.to_json()) == json.loads(json.dumps(memory.to_dict()))
    assert ", " not in memory.to_json() and '": ' not in memory.to_json()


def test_from_dict_round_trip() -> None:
    one = result()
    memory = Memory(data={"a": 1}, results=[one], messages=[answer()], session_id="s")
    memory.set("k", {"x": 1})
    rebuilt = Memory.from_dict(json.loads(memory.to_json()))
    assert rebuilt.to_dict() == memory.to_dict()
    assert isinstance(rebuilt.results[0], RobotResult) and rebuilt.results[0].checksum == one.checksum
    assert isinstance(rebuilt.messages[0], Message)
    assert isinstance(rebuilt.cache, ResponseCache) and not rebuilt.is_redis
    assert Memory.from_json(memory.to_json(), network_name="n").network_name == "n"
    assert Memory.from_dict({}).to_dict() == {"data": {}, "results": [], "messages": [], "custom": {}}


def test_copy_is_deep_and_silent() -> None:
    memory = Memory(data={"nested": {"list": [1]}}, results=[result()], session_id="s", network_name="net",
                    enable_cache=False)
    memory.set("custom", {"items": [1]})
    seen: list[MemoryChange] = []
    memory.subscribe_pattern("*", callback=seen.append)
    memory.current_writer = "writer"
    clone = memory.copy()
    assert seen == []  # copying notifies nobody
    assert clone.to_dict() == memory.to_dict()
    clone.data["nested"]["list"].append(2)
    clone.get("custom")["items"].append(2)
    assert memory.data["nested"]["list"] == [1] and memory.get("custom") == {"items": [1]}
    assert clone.network_name == "net" and clone.cache is None and clone.session_id == "s"
    assert clone.current_writer is None
    assert clone.results[0] is memory.results[0]
    clone.set("custom", 2)
    assert seen == []  # subscriptions are not copied
    assert isinstance(copy.deepcopy(memory), Memory) and copy.copy(memory).get("custom") == {"items": [1]}


def test_repr() -> None:
    memory = Memory(network_name="n")
    memory.set("k", 1)
    assert repr(memory) == "<Memory backend=hash keys=['k'] network_name='n'>"


def test_clone_is_a_deep_isolated_copy_that_keeps_the_cache_setting() -> None:
    memory = Memory(enable_cache=False, network_name="crew", data={"n": {"deep": 1}})
    memory.set("k", {"v": [1]})
    seen: list[str] = []
    memory.subscribe("k", callback=lambda change: seen.append(change.key))
    clone = memory.clone()
    assert clone is not memory and not clone.enable_cache and clone.network_name == "crew"
    assert clone.get("k") == {"v": [1]} and clone.data.to_dict() == {"n": {"deep": 1}}
    clone.get("k")["v"].append(2)
    clone.data["n"]["deep"] = 2
    clone.set("k2", 1)
    assert memory.get("k") == {"v": [1]} and memory.data["n"] == {"deep": 1} and "k2" not in memory
    assert seen == [] and not clone.is_subscribed("k")  # no subscriptions carried, no notifications
    assert Memory().clone().enable_cache
