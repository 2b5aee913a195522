from __future__ import annotations

import io
import logging
from typing import Literal

import pytest

import robotlab.tools.schema as tools_module
from robotlab.errors import ToolError
from robotlab.tools import AskUser, FunctionTool, Tool, tool


@tool
def get_weather(location: str, unit: Literal["c", "f"] = "c") -> dict[str, object]:
    """Current weather for a location.

    Args:
        location: City name, for example "Paris".
        unit: Temperature unit.
    """
    return {"location": location, "unit": unit, "temp": 21}


@tool(name="add_numbers", description="Add two integers.")
async def add(a: int, b: int) -> int:
    return a + b


def test_tool_decorator_builds_schema_from_hints_and_docstring() -> None:
    assert isinstance(get_weather, FunctionTool)
    assert get_weather.name == "get_weather"
    assert get_weather.description == "Current weather for a location."
    schema = get_weather.params_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["location"]
    assert schema["properties"]["location"] == {"type": "string", "description": 'City name, for example "Paris".'}
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert schema["properties"]["unit"]["default"] == "c"
    assert get_weather.to_json_schema()["function"]["name"] == "get_weather"


def test_tool_decorator_with_options_and_async_function() -> None:
    assert add.name == "add_numbers"
    assert add.description == "Add two integers."
    assert add.call({"a": 2, "b": 3}) == 5
    assert add.call('{"a": 1, "b": 1}') == 2


def test_function_tool_is_still_callable_directly() -> None:
    assert get_weather("Rome")["location"] == "Rome"


def test_invalid_json_is_returned_to_the_model_as_tool_error() -> None:
    text = get_weather.call('{"location": ')
    assert text.startswith("Error (get_weather): arguments are not valid JSON")


def test_schema_failure_names_the_argument() -> None:
    text = add.call({"a": "not a number", "b": 1})
    assert text.startswith("Error (add_numbers): invalid arguments: a:")
    missing = get_weather.call({})
    assert missing == "Error (get_weather): invalid arguments: location: Field required"


def test_non_object_arguments_are_rejected() -> None:
    assert get_weather.call("[1, 2]") == "Error (get_weather): arguments must be a JSON object, got list"


def test_exception_in_tool_becomes_error_text_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="robotlab"):
        assert explode.call({}) == "Error (explode): boom"
    assert "Tool 'explode' error: RuntimeError: boom" in caplog.text


def test_tool_error_is_not_logged_and_marks_retryable(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def flaky() -> str:
        """Fails in a retryable way."""
        raise ToolError("try later", retryable=True)

    with caplog.at_level(logging.WARNING, logger="robotlab"):
        assert flaky.call() == "Error (flaky): try later (retryable)"
    assert caplog.text == ""


class RefundOrder(Tool):
    description = "Refund an order."

    def execute(self, order_id: int, reason: str = "") -> str:
        return f"refunded {order_id} {reason}".strip()


class Strict(Tool):
    raise_on_error = True

    def execute(self) -> str:
        raise ValueError("strict failure")


class StrictChild(Strict):
    def execute(self) -> str:
        raise ValueError("child failure")


def test_tool_subclass_name_schema_and_execute() -> None:
    refund = RefundOrder()
    assert refund.name == "refund_order"
    assert refund.params_schema["required"] == ["order_id"]
    assert refund.call({"order_id": 7, "reason": "late"}) == "refunded 7 late"
    assert refund.to_dict() == {"name": "refund_order", "description": "Refund an order."}


def test_raise_on_error_is_not_inherited() -> None:
    with pytest.raises(ValueError, match="strict failure"):
        Strict().call({})
    assert StrictChild.raise_on_error is False
    assert StrictChild().call({}) == "Error (strict_child): child failure"


def test_tool_create_with_schema_and_handler() -> None:
    seen: list[dict[str, object]] = []

    def handler(args: dict[str, object]) -> str:
        seen.append(args)
        return f"hello {args['who']}"

    greet = Tool.create(
        name="greet",
        description="Greets",
        parameters={"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
        handler=handler,
    )
    assert greet.name == "greet"
    assert greet.params_schema["properties"] == {"who": {"type": "string"}}
    assert greet.call({"who": "Ada"}) == "hello Ada"
    assert seen == [{"who": "Ada"}]
    assert greet.call({}) == "Error (greet): invalid arguments: missing required who"


def test_tool_create_accepts_bare_properties_and_mcp_tag() -> None:
    remote = Tool.create(
        name="remote", parameters={"q": {"type": "string"}}, mcp="github", handler=lambda args: args["q"]
    )
    assert remote.params_schema == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert remote.is_mcp
    assert remote.to_dict() == {"name": "remote", "mcp": "github"}
    assert remote.call({"q": "x"}) == "x"


def test_tool_create_without_handler_reports_it() -> None:
    assert Tool.create(name="empty").call({}) == "Error (empty): tool has no handler"


class _Robot:
    name = "helper"

    def __init__(self, answer: str) -> None:
        self.input = io.StringIO(answer)
        self.output = io.StringIO()


def test_ask_user_prints_question_choices_and_maps_numbers() -> None:
    robot = _Robot("2\n")
    ask = AskUser(robot=robot)  # type: ignore[arg-type]
    assert ask.name == "robot_lab--ask_user"
    assert ask.call({"question": "Which?", "choices": ["red", "blue"]}) == "blue"
    assert robot.output.getvalue() == "\n[helper] Which?\n  1. red\n  2. blue\n> "


def test_ask_user_default_and_out_of_range_and_eof() -> None:
    robot = _Robot("\n")
    assert AskUser(robot=robot).call({"question": "Name?", "default": "Bob"}) == "Bob"  # type: ignore[arg-type]
    assert robot.output.getvalue().endswith("> [Bob] ")
    assert AskUser(robot=_Robot("9\n")).call({"question": "?", "choices": ["a"]}) == "9"  # type: ignore[arg-type]
    assert AskUser(robot=_Robot("")).call({"question": "?"}) == ""  # type: ignore[arg-type]


def test_docstring_parser_handles_multiline_descriptions() -> None:
    summary, params = tools_module.docstring_parts(
        """Do a thing.

        Args:
            first: The first
                line continues.
            second (int): Another.

        Returns:
            Nothing.
        """
    )
    assert summary == "Do a thing."
    assert params == {"first": "The first line continues.", "second": "Another."}
