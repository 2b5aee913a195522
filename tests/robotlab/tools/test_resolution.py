from __future__ import annotations

import pytest

from robotlab import tool_config
from robotlab.tool_config import (
    INHERIT,
    NONE,
    NONE_VALUES,
    filter_tools,
    is_inherit_value,
    is_none_value,
    resolve,
    resolve_mcp,
    resolve_tools,
)
from robotlab.tools import Tool, tool


@tool
def order_lookup(order_id: str) -> str:
    """Look an order up."""
    return order_id


class RefundTool(Tool):
    description = "Refund an order."

    def execute(self, order_id: str) -> str:
        return order_id


def test_constants() -> None:
    assert NONE == "none"
    assert INHERIT == "inherit"
    assert NONE_VALUES == (None, [], "none")


@pytest.mark.parametrize("value", [None, [], (), "none"])
def test_none_values(value: object) -> None:
    assert is_none_value(value)
    assert resolve(value, parent_value=["a"]) == []


@pytest.mark.parametrize("value", ["inherit", ["none"], [None], "", 0, False, "NONE", {}, set()])
def test_not_none_values(value: object) -> None:
    assert not is_none_value(value)


def test_every_listed_none_value_is_a_none_value() -> None:
    assert all(is_none_value(value) for value in NONE_VALUES)


def test_inherit_value() -> None:
    assert is_inherit_value("inherit")
    assert not is_inherit_value("none")
    assert not is_inherit_value(["inherit"])
    assert not is_inherit_value(None)


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        (None, []),
        (["a", "b"], ["a", "b"]),
        (("a", "b"), ["a", "b"]),
        ("a", ["a"]),
        ("none", ["none"]),  # an unresolved parent of "none" is taken as it is, as in RobotLab
        ([], []),
    ],
)
def test_inherit_takes_the_parent_as_a_list(parent: object, expected: list[object]) -> None:
    assert resolve("inherit", parent_value=parent) == expected


def test_inherit_returns_a_new_list() -> None:
    parent = ["a"]
    resolved = resolve("inherit", parent_value=parent)
    resolved.append("b")
    assert parent == ["a"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["x", "y"], ["x", "y"]),
        ("x", ["x"]),
        (("x",), ["x"]),
        ({"name": "server", "command": "srv"}, [{"name": "server", "command": "srv"}]),
        (["none"], ["none"]),
    ],
)
def test_anything_else_is_the_value_as_a_list(value: object, expected: list[object]) -> None:
    assert resolve(value, parent_value=["parent"]) == expected


def test_resolve_mcp_keeps_server_configs() -> None:
    server = {"name": "fs", "transport": {"type": "stdio", "command": "mcp-fs"}}
    assert resolve_mcp([server], parent_value=[]) == [server]
    assert resolve_mcp([server], parent_value=[])[0] is server
    assert resolve_mcp("inherit", parent_value=[server]) == [server]
    assert resolve_mcp("none", parent_value=[server]) == []


def test_resolve_tools_maps_entries_to_names() -> None:
    assert resolve_tools(["a", order_lookup, RefundTool, RefundTool()], parent_value=[]) == [
        "a", "order_lookup", "refund_tool", "refund_tool"]
    assert resolve_tools("inherit", parent_value=[order_lookup]) == ["order_lookup"]
    assert resolve_tools("none", parent_value=["a"]) == []
    assert resolve_tools("inherit", parent_value="none") == ["none"]
    assert resolve_tools([1], parent_value=[]) == ["1"]


def test_filter_tools_by_name() -> None:
    tools = [order_lookup, RefundTool()]
    assert filter_tools(tools, allowed_names=["order_lookup"]) == [order_lookup]
    assert filter_tools(tools, allowed_names=["refund_tool", "order_lookup"]) == tools  # order of tools
    assert filter_tools(tools, allowed_names=["unknown"]) == []


def test_filter_tools_empty_allowlist_means_no_tools() -> None:
    assert filter_tools([order_lookup, RefundTool()], allowed_names=[]) == []
    assert filter_tools([order_lookup], allowed_names=()) == []


def test_filter_tools_names_strings_verbatim_and_objects_by_name() -> None:
    tools = ["order_lookup", "Other", RefundTool, RefundTool(), order_lookup]
    assert filter_tools(tools, allowed_names=["order_lookup"]) == ["order_lookup", order_lookup]
    assert filter_tools(tools, allowed_names=["refund_tool"]) == [RefundTool, tools[3]]
    assert filter_tools(tools, allowed_names=["Other"]) == ["Other"]
    assert filter_tools(tools, allowed_names=["other"]) == []  # case matters


def test_filter_tools_accepts_tools_in_the_allowlist() -> None:
    assert filter_tools([order_lookup, RefundTool()], allowed_names=[order_lookup]) == [order_lookup]


def test_filter_tools_instance_name_differs_from_class_name() -> None:
    created = Tool.create(name="refund", description="Refund.")
    tools = [RefundTool, created]
    assert filter_tools(tools, allowed_names=["refund"]) == [created]
    assert filter_tools(tools, allowed_names=["refund_tool"]) == [RefundTool]


def test_module_surface() -> None:
    assert sorted(tool_config.__all__) == [
        "INHERIT", "NONE", "NONE_VALUES", "filter_tools", "is_inherit_value", "is_none_value", "resolve",
        "resolve_mcp", "resolve_tools"]
