"""The example project's tools: the time, and a safe calculator."""

from __future__ import annotations

import ast
import operator
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import robotlab

_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
              ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
              ast.USub: operator.neg, ast.UAdd: operator.pos}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](left, right)  # type: ignore[no-any-return]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))  # type: ignore[no-any-return]
    raise ValueError("only numbers and + - * / // % ** are allowed")


@robotlab.tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as "12 * (3 + 4)".

    Args:
        expression: Numbers, parentheses and + - * / // % **.
    """
    value = _evaluate(ast.parse(expression, mode="eval"))
    return str(int(value) if float(value).is_integer() else round(value, 10))


@robotlab.tool
def current_time(zone: str = "UTC") -> str:
    """The current date and time in a time zone.

    Args:
        zone: An IANA time zone name such as "Europe/Paris" (default UTC).
    """
    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise robotlab.ToolError(f"unknown time zone {zone!r}; use a name like 'Europe/Paris'") from None
    return datetime.now(tz).strftime("%Y-%m-%d %H:%M:%S %Z")
