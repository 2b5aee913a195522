from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from robotlab.errors import ToolNotFoundError
from robotlab.tools import Tool, tool
from robotlab.tools.manifest import ToolDescriptor, ToolManifest, ToolRegistry, tool_registry


@tool
def get_weather(location: str) -> str:
    """Get current weather for a location."""
    return location


@tool
def calculate(expression: str) -> str:
    """Performs basic arithmetic."""
    return expression


class RefundTool(Tool):
    description = "Refund an order."

    def execute(self, order_id: str) -> str:
        return order_id


@pytest.fixture
def manifest() -> ToolManifest:
    return ToolManifest([get_weather, calculate])


@pytest.fixture(autouse=True)
def clean_registry() -> Iterator[None]:
    saved = tool_registry.values
    tool_registry.clear()
    yield
    tool_registry.replace(saved)


# -- ToolManifest ---------------------------------------------------------------------------
def test_construction_and_names(manifest: ToolManifest) -> None:
    assert manifest.names == ["get_weather", "calculate"]
    assert manifest.values == [get_weather, calculate]
    assert manifest.all == [get_weather, calculate]
    assert manifest.to_list() == [get_weather, calculate]
    assert len(manifest) == 2 and manifest.size == 2
    assert not manifest.is_empty
    assert ToolManifest().is_empty and len(ToolManifest()) == 0
    assert ToolManifest(get_weather).names == ["get_weather"]  # a single tool, like Ruby's Array()
    assert ToolManifest(None).is_empty


def test_lookup(manifest: ToolManifest) -> None:
    assert manifest["get_weather"] is get_weather
    assert manifest["missing"] is None
    assert manifest.get("calculate") is calculate
    assert manifest.get("missing") is None
    assert manifest.get("missing", "default") == "default"
    assert manifest.has("calculate") and not manifest.has("missing")
    assert "calculate" in manifest and "missing" not in manifest


def test_lookups_coerce_the_name_with_str() -> None:
    numbered = Tool.create(name="42", description="The answer.")
    manifest = ToolManifest([numbered])
    assert manifest[42] is numbered
    assert manifest.has(42) and 42 in manifest
    assert manifest.fetch(42) is numbered
    assert manifest.remove(42) is numbered


def test_fetch_raises_with_available_names(manifest: ToolManifest) -> None:
    assert manifest.fetch("calculate") is calculate
    with pytest.raises(ToolNotFoundError) as info:
        manifest.fetch("nope")
    assert str(info.value) == "Tool not found: nope. Available tools: get_weather, calculate"


def test_fetch_on_an_empty_manifest() -> None:
    with pytest.raises(ToolNotFoundError) as info:
        ToolManifest().fetch("x")
    assert str(info.value) == "Tool not found: x. Available tools: "


def test_add_returns_self_and_replaces_by_name(manifest: ToolManifest) -> None:
    other = Tool.create(name="get_weather", description="Another weather tool.")
    assert manifest.add(other) is manifest
    assert manifest["get_weather"] is other
    assert manifest.names == ["get_weather", "calculate"]  # replaced in place


def test_add_requires_a_name() -> None:
    with pytest.raises(TypeError, match="has no name"):
        ToolManifest().add(object())


def test_tool_classes_and_instances_are_keyed_by_their_names() -> None:
    manifest = ToolManifest([RefundTool, Tool.create(name="refund")])
    assert manifest.names == ["refund_tool", "refund"]
    assert manifest["refund_tool"] is RefundTool


def test_remove(manifest: ToolManifest) -> None:
    assert manifest.remove("calculate") is calculate
    assert manifest.remove("calculate") is None
    assert manifest.names == ["get_weather"]


def test_iteration_yields_tools(manifest: ToolManifest) -> None:
    assert list(manifest) == [get_weather, calculate]
    assert [t.name for t in manifest] == ["get_weather", "calculate"]


def test_clear_and_replace(manifest: ToolManifest) -> None:
    assert manifest.replace([calculate]) is manifest
    assert manifest.names == ["calculate"]  # the whole collection, not one entry
    assert manifest.clear() is manifest
    assert manifest.is_empty


def test_merge_mutates_and_returns_self(manifest: ToolManifest) -> None:
    refund = RefundTool()
    other = ToolManifest([refund])
    assert manifest.merge(other) is manifest
    assert manifest.names == ["get_weather", "calculate", "refund_tool"]
    assert other.names == ["refund_tool"]

    created = Tool.create(name="created")
    assert manifest.merge([created]).names[-1] == "created"
    single = Tool.create(name="single")
    assert manifest.merge(single).names[-1] == "single"
    assert manifest.merge(None) is manifest
    assert len(manifest) == 5


@pytest.mark.parametrize("bad", ["get_weather", 42, {"name": "x"}])
def test_merge_rejects_other_values(manifest: ToolManifest, bad: object) -> None:
    with pytest.raises(TypeError, match="cannot merge"):
        manifest.merge(bad)


def test_to_dict_and_to_json(manifest: ToolManifest) -> None:
    expected = {
        "get_weather": {"name": "get_weather", "description": "Get current weather for a location."},
        "calculate": {"name": "calculate", "description": "Performs basic arithmetic."},
    }
    assert manifest.to_dict() == expected
    assert json.loads(manifest.to_json()) == expected


def test_to_dict_includes_mcp_and_handles_tool_classes() -> None:
    mcp_tool = Tool.create(name="read_file", description="Read a file.", mcp="filesystem")
    manifest = ToolManifest([mcp_tool, RefundTool])
    assert manifest.to_dict() == {
        "read_file": {"name": "read_file", "description": "Read a file.", "mcp": "filesystem"},
        "refund_tool": {"name": "refund_tool", "description": "Refund an order."},
    }


def test_from_dict_builds_created_tools() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
    manifest = ToolManifest.from_dict({
        "double": {"description": "Double x.", "parameters": schema, "handler": lambda args: args["x"] * 2},
    })
    double = manifest.fetch("double")
    assert isinstance(double, Tool)
    assert double.description == "Double x."
    assert double.params_schema == schema
    assert double.call({"x": 21}) == 42


def test_from_dict_is_not_the_inverse_of_to_dict(manifest: ToolManifest) -> None:
    rebuilt = ToolManifest.from_dict(manifest.to_dict())
    assert rebuilt.names == manifest.names
    weather = rebuilt.fetch("get_weather")
    assert weather.description == "Get current weather for a location."
    assert weather.params_schema == {"type": "object", "properties": {}}  # the parameters are gone
    assert get_weather.params_schema["properties"]  # the original has them
    assert weather.call({"location": "Paris"}) == "Error (get_weather): tool has no handler"
    assert get_weather.call({"location": "Paris"}) == "Paris"


def test_repr(manifest: ToolManifest) -> None:
    assert repr(manifest) == "<ToolManifest ['get_weather', 'calculate']>"


# -- summary and select_by_names -------------------------------------------------------------
def test_summary(manifest: ToolManifest) -> None:
    manifest.add(Tool.create(name="bare"))
    assert manifest.summary() == [
        {"name": "get_weather", "description": "Get current weather for a location."},
        {"name": "calculate", "description": "Performs basic arithmetic."},
        {"name": "bare", "description": ""},
    ]
    assert ToolManifest().summary() == []


def test_select_by_names_builds_a_new_sub_manifest(manifest: ToolManifest) -> None:
    selected = manifest.select_by_names(["calculate"])
    assert isinstance(selected, ToolManifest)
    assert selected is not manifest
    assert selected.values == [calculate]
    assert manifest.names == ["get_weather", "calculate"]


def test_select_by_names_skips_unknown_names_and_keeps_manifest_order(manifest: ToolManifest) -> None:
    selected = manifest.select_by_names(["calculate", "hallucinated_tool", "get_weather", "calculate"])
    assert selected.names == ["get_weather", "calculate"]


def test_select_by_names_empty_selects_nothing(manifest: ToolManifest) -> None:
    assert manifest.select_by_names([]).is_empty


def test_select_by_names_accepts_a_single_name_and_tools(manifest: ToolManifest) -> None:
    assert manifest.select_by_names("get_weather").names == ["get_weather"]
    assert manifest.select_by_names([calculate]).names == ["calculate"]


# -- the registry ---------------------------------------------------------------------------
def test_descriptor_from_tool() -> None:
    assert ToolDescriptor.from_tool(get_weather) == ToolDescriptor("get_weather", "Get current weather for a location.")
    assert ToolDescriptor.from_tool(RefundTool) == ToolDescriptor("refund_tool", "Refund an order.")
    bare = ToolDescriptor.from_tool(Tool.create(name="bare"))
    assert bare == ToolDescriptor("bare", "")
    assert ToolDescriptor.from_tool(bare) is bare
    assert bare.to_dict() == {"name": "bare"}
    assert ToolDescriptor("x", "y").to_dict() == {"name": "x", "description": "y"}


def test_registry_stores_descriptors_not_live_tools() -> None:
    descriptor = tool_registry.register(get_weather)
    assert descriptor == ToolDescriptor("get_weather", "Get current weather for a location.")
    assert tool_registry["get_weather"] == descriptor
    assert tool_registry["get_weather"] is not get_weather
    assert not hasattr(tool_registry["get_weather"], "call")
    tool_registry.add(calculate).add(RefundTool())
    assert tool_registry.names == ["get_weather", "calculate", "refund_tool"]
    assert all(isinstance(entry, ToolDescriptor) for entry in tool_registry)


def test_registry_is_a_tool_manifest() -> None:
    assert isinstance(tool_registry, ToolRegistry)
    assert isinstance(tool_registry, ToolManifest)


def test_registry_summary_and_select_by_names() -> None:
    for item in (get_weather, calculate, RefundTool):
        tool_registry.register(item)
    assert tool_registry.summary() == [
        {"name": "get_weather", "description": "Get current weather for a location."},
        {"name": "calculate", "description": "Performs basic arithmetic."},
        {"name": "refund_tool", "description": "Refund an order."},
    ]
    selected = tool_registry.select_by_names(["refund_tool", "get_weather", "unknown"])
    assert type(selected) is ToolManifest
    assert selected.names == ["get_weather", "refund_tool"]
    assert selected.to_dict() == {
        "get_weather": {"name": "get_weather", "description": "Get current weather for a location."},
        "refund_tool": {"name": "refund_tool", "description": "Refund an order."},
    }


def test_registry_reregistering_replaces_the_descriptor() -> None:
    tool_registry.register(Tool.create(name="search", description="Old."))
    tool_registry.register(Tool.create(name="search", description="New."))
    assert tool_registry.summary() == [{"name": "search", "description": "New."}]


def test_registry_register_requires_a_name() -> None:
    with pytest.raises(TypeError, match="has no name"):
        tool_registry.register(object())


def test_registry_operations_keep_descriptors() -> None:
    registry = ToolRegistry([get_weather])
    assert registry.merge([calculate]) is registry
    assert registry.merge(ToolManifest([RefundTool()])) is registry
    assert all(isinstance(entry, ToolDescriptor) for entry in registry)
    assert registry.replace([calculate]) is registry
    assert registry.names == ["calculate"]
    assert registry.remove("calculate") == ToolDescriptor("calculate", "Performs basic arithmetic.")
    assert registry.clear() is registry and registry.is_empty


def test_registry_from_threads() -> None:
    registry = ToolRegistry()

    def worker(start: int) -> None:
        for index in range(start, start + 200):
            registry.register(Tool.create(name=f"tool_{index}", description=str(index)))
            registry.summary()

    threads = [threading.Thread(target=worker, args=(n * 200,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive(), "the thread did not finish within 60 s"
    assert len(registry) == 1600
    assert len(registry.summary()) == 1600
