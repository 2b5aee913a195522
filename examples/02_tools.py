"""02 - Tools: a robot that calls Python functions and classes.

Shows a ``@robotlab.tool`` function (its type hints and docstring become the schema the model sees), a
``robotlab.Tool`` subclass with state, and what the run reports about the calls it made
(``result.tool_calls``, ``on_tool_call``). The model decides which tool to call; the robot runs it and
sends the result back until the model answers in words.

Run it: ``python examples/02_tools.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import ast
import operator
import random

from _offline import llm

import robotlab
from robotlab.testing import tool_call

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise robotlab.ToolError("only numbers and + - * / are allowed")


@robotlab.tool
def calculator(expression: str) -> float:
    """Evaluate an arithmetic expression.

    Args:
        expression: Numbers and the operators + - * /, such as "(17 + 25) * 3".
    """
    return _evaluate(ast.parse(expression, mode="eval").body)


class FortuneCookie(robotlab.Tool):
    """Opens a fortune cookie (a stateful tool: it never repeats a fortune)."""

    description = "Open a fortune cookie and read the fortune inside."
    FORTUNES = ["A thrilling time is in your near future.", "Your code will compile on the first try."]

    def __init__(self, *, robot: robotlab.Robot | None = None) -> None:
        super().__init__(robot=robot)
        self.left = random.Random(7).sample(self.FORTUNES, len(self.FORTUNES))

    def execute(self) -> str:
        """Open the next cookie."""
        return self.left.pop() if self.left else "The jar is empty."


robot = robotlab.build(
    name="assistant",
    system_prompt="You are a helpful assistant. Use the calculator for arithmetic.",
    local_tools=[calculator, FortuneCookie],
    on_tool_call=lambda call: print(f"  -> {call.name}({call.arguments})"),
    llm=llm(
        tool_call("calculator", expression="(17 + 25) * 3"),
        "(17 + 25) * 3 is 126.",
        tool_call("fortune_cookie"),
        "Your fortune cookie says good things are coming.",
    ),
)

for question in ("What is (17 + 25) * 3?", "Open a fortune cookie for me."):
    print(f"user: {question}")
    result = robot.run(question)
    for tool_result in result.tool_calls:
        print(f"  <- {tool_result.tool.name} returned {tool_result.data!r}")
    print(f"assistant: {result.reply}")

print(f"calculator checked by hand: {calculator.call({'expression': '(17 + 25) * 3'})}")
