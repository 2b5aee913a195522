from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from typing import Any

import pytest

import robotlab
from robotlab import hooks
from robotlab.hooks import LlmGenerationHookContext, ToolCallHookContext
from robotlab.narrator import Narrator
from robotlab.testing import FakeLLM, text, tool_call


@pytest.fixture(autouse=True)
def output() -> Iterator[io.StringIO]:
    hooks.clear_hooks()
    buffer = io.StringIO()
    Narrator.output = buffer
    yield buffer
    Narrator.output = None
    hooks.clear_hooks()


class Named:
    def __init__(self, name: str) -> None:
        self.name = name


def narrate(hook: str, ctx: Any) -> None:
    with ctx.with_namespace("narrator"):
        asyncio.run(Narrator.call(hook, ctx))


def test_constants_and_namespace() -> None:
    assert Narrator.MAX == 80
    assert Narrator.namespace == "narrator"


def test_before_llm_generation_says_who_is_thinking(output: io.StringIO) -> None:
    narrate("before_llm_generation", LlmGenerationHookContext(robot=Named("helper")))
    narrate("before_llm_generation", LlmGenerationHookContext(robot=None))
    assert output.getvalue() == "  · helper: thinking…\n  · thinking…\n"


def test_before_tool_call_shows_the_first_argument_clipped(output: io.StringIO) -> None:
    first = {"path": "a.py", "body": "x"}
    narrate("before_tool_call", ToolCallHookContext(tool=Named("write"), tool_args=first))
    narrate("before_tool_call", ToolCallHookContext(tool=Named("dump"), tool_args={}))
    narrate("before_tool_call", ToolCallHookContext(tool=Named("long"), tool_args={"q": "y" * 81 + "\nmore"}))
    narrate("before_tool_call", ToolCallHookContext(tool=Named("exact"), tool_args={"q": "z" * 80}))
    assert output.getvalue().splitlines() == [
        '  · → write path="a.py"',
        "  · → dump",
        f'  · → long q="{"y" * 80}…"',
        f'  · → exact q="{"z" * 80}"',
    ]


def test_after_tool_call_reports_only_errors_first_line(output: io.StringIO) -> None:
    ctx = ToolCallHookContext(tool=Named("bash"))
    narrate("after_tool_call", ctx)
    assert output.getvalue() == ""
    ctx.tool_error = RuntimeError("boom\nsecond line")
    narrate("after_tool_call", ctx)
    assert output.getvalue() == "  ·   ✗ boom\n"


def test_narration_never_breaks_a_run() -> None:
    class Broken(io.StringIO):
        def write(self, s: str) -> int:
            raise OSError("closed")

    Narrator.output = Broken()
    narrate("before_tool_call", ToolCallHookContext(tool=Named("t"), tool_args={"a": 1}))
    narrate("before_llm_generation", LlmGenerationHookContext(robot=object()))


def test_default_output_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    Narrator.output = None
    narrate("before_llm_generation", LlmGenerationHookContext(robot=Named("r")))
    assert capsys.readouterr().err == "  · r: thinking…\n"


def test_enable_registers_globally_once_and_narrates_a_run() -> None:
    buffer = io.StringIO()
    assert Narrator.enable(output=buffer) is Narrator
    assert Narrator.enable(output=buffer) is Narrator
    assert [r.handler_class for r in hooks.get_hooks().registrations] == [Narrator]

    @robotlab.tool
    def get_weather(location: str) -> str:
        """Weather."""
        raise ValueError("no data\nat all")

    llm = FakeLLM([tool_call("get_weather", location="Paris"), text("Sorry.")])
    robotlab.build(name="weather", llm=llm, local_tools=[get_weather]).run("Weather?")
    assert buffer.getvalue().splitlines() == [
        "  · weather: thinking…",
        '  · → get_weather location="Paris"',
        "  ·   ✗ no data",
    ]


def test_values_are_quoted_as_ruby_inspect_does(output: io.StringIO) -> None:
    cases: list[Any] = [
        None,
        42,
        True,
        'say "hi"',
        "back\\slash",
        "tab\there",
        "#{x} #$y #@z #a",
        "\x1b\x01\x7f",
        "  padded  \r\nnext",
        "mutually\x0bexclusive",
        "naïve ✓",
    ]
    for value in cases:
        narrate("before_tool_call", ToolCallHookContext(tool=Named("t"), tool_args={"v": value}))
    assert output.getvalue().splitlines() == [
        '  · → t v=""',
        '  · → t v="42"',
        '  · → t v="true"',
        '  · → t v="say \\"hi\\""',
        '  · → t v="back\\\\slash"',
        '  · → t v="tab\\there"',
        '  · → t v="\\#{x} \\#$y \\#@z #a"',
        '  · → t v="\\e\\u0001\\x7F"',
        '  · → t v="padded"',
        '  · → t v="mutually\\vexclusive"',
        '  · → t v="naïve ✓"',
    ]


def test_a_blank_robot_name_is_still_named_and_non_mapping_args_are_not_shown(output: io.StringIO) -> None:
    narrate("before_llm_generation", LlmGenerationHookContext(robot=Named("")))
    narrate("before_tool_call", ToolCallHookContext(tool=Named("raw"), tool_args="not json"))
    assert output.getvalue() == "  · : thinking…\n  · → raw\n"
