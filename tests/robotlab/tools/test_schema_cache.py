"""Function tools reuse their arguments model and schema: a robot built per request does not rebuild them."""

from __future__ import annotations

from dataclasses import dataclass

import robotlab
from robotlab.tools import FunctionTool


def get_weather(location: str, unit: str = "c") -> str:
    """Current weather.

    Args:
        location: The city.
        unit: c or f.
    """
    return f"sunny in {location}"


def test_a_function_wrapped_twice_shares_one_model_and_one_schema() -> None:
    first, second = FunctionTool(get_weather), FunctionTool(get_weather)
    assert first._arguments_model is second._arguments_model
    assert first.params_schema is second.params_schema
    assert first.params_schema["properties"]["location"] == {"type": "string", "description": "The city."}
    renamed = FunctionTool(get_weather, name="weather_now")
    assert renamed._arguments_model is not first._arguments_model  # another name, another model
    robots = [robotlab.build(name=f"r{n}", model="gpt-4o-mini", local_tools=[get_weather]) for n in range(2)]
    assert robots[0].local_tools[0]._arguments_model is robots[1].local_tools[0]._arguments_model


@dataclass
class Desk:  # a dataclass with eq=True is unhashable, and so are its bound methods
    name: str

    def lookup(self, key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return f"{self.name}:{key}"


def test_an_unhashable_bound_method_still_becomes_a_tool() -> None:
    tool = FunctionTool(Desk("front").lookup)
    assert tool.params_schema["required"] == ["key"] and tool(key="a") == "front:a"
