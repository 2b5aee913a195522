"""The demo model reads the inputs a first-hour user types (issue 17)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from robotlab.llm.types import LLMRequest
from robotlab.testing import DemoLLM


def _tool(name: str, description: str, parameter: str) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {parameter: {"type": "string"}}, "required": [parameter]}}}


def _call(text: str, *tools: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    request = LLMRequest(model="demo", messages=[{"role": "user", "content": text}], tools=list(tools))
    response = asyncio.run(DemoLLM().complete(request))
    call = response.tool_calls[0]
    return call.name, json.loads(call.arguments)


@pytest.mark.parametrize(("text", "place"), [
    ("What's the weather in Paris?", "Paris"),
    ("weather in New York", "New York"),
    ("Tell me the weather", "Tell me the weather"),  # no place named: the message, as before
])
def test_a_place_parameter_gets_the_place(text: str, place: str) -> None:
    assert _call(text, _tool("get_weather", "The weather in a city", "location")) == ("get_weather",
                                                                                       {"location": place})


def test_other_parameters_still_get_the_message() -> None:
    assert _call("search the docs in Paris", _tool("search", "Search the docs", "query")) == (
        "search", {"query": "search the docs in Paris"})


@pytest.mark.parametrize(("text", "expression"), [
    ("what is 2 ** 1000?", "2**1000"), ("17 // 5", "17//5"), ("10 % 3", "10%3"), ("12 * 3 + 4", "12*3+4")])
def test_power_floor_division_and_modulo_are_arithmetic(text: str, expression: str) -> None:
    assert _call(text, _tool("calculate", "Evaluate arithmetic", "expression")) == (
        "calculate", {"expression": expression})


def test_options_after_a_colon_become_the_questions_choices() -> None:
    ask = _tool("ask_user", "Ask the user a question", "question")
    ask["function"]["parameters"]["properties"]["choices"] = {"type": "array", "items": {"type": "string"}}
    name, arguments = _call("Ask the user which plan suits them: basic, pro or team", ask)
    assert name == "ask_user" and arguments["choices"] == ["basic", "pro", "team"]
    assert "choices" not in _call("Ask the user which plan suits them", ask)[1]


def test_the_demo_model_answers_a_question_about_markdown_in_markdown() -> None:
    request = LLMRequest(model="demo", messages=[{"role": "user", "content": "Show me some Markdown"}])
    reply = asyncio.run(DemoLLM(delay=0).complete(request)).content or ""
    assert "| robot | role |" in reply and "```python" in reply and "- a list item" in reply


def _model_tool(name: str, description: str, required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": properties, "required": required}}}


ORDER_TOOLS = (
    _model_tool("search_order", "Search the orders you may see. Filter on number, status.", [],
                status={"type": "string", "enum": ["placed", "shipped"]}),
    _model_tool("update_order", "Change one order you may see, by its id: give only the fields to change, among "
                "status.", ["id"], id={"type": "integer"}, status={"type": "string", "enum": ["placed", "shipped"]}),
)


@pytest.mark.parametrize(("text", "expected"), [
    ("Show my orders", ("search_order", {})),
    ("Show my shipped orders", ("search_order", {"status": "shipped"})),
    ("Change order 2 to shipped", ("update_order", {"id": 2, "status": "shipped"})),
    ("Change order A-1002 to shipped", ("update_order", {"id": "Change order A-1002 to shipped", "status": "shipped"})),
])
def test_the_tool_with_the_most_words_in_common_gets_numbers_and_named_choices(
        text: str, expected: tuple[str, dict[str, Any]]) -> None:
    assert _call(text, *ORDER_TOOLS) == expected
