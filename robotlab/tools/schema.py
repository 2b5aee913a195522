"""JSON schemas for tools, from Python: a function's signature and type hints, and its docstring.

:func:`signature_model` turns a function's keyword parameters into a pydantic model, whose JSON schema
(:func:`clean_schema`) is what the model sees; :func:`docstring_parts` reads the summary and the
Google-style ``Args:`` descriptions that become the tool's and its arguments' descriptions.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, get_type_hints

from ..run_context import context_parameter

if TYPE_CHECKING:
    import pydantic


__all__ = ["clean_schema", "docstring_parts", "format_validation_error", "model_schema", "run_context_parameter",
           "signature_model", "snake_case"]


def snake_case(name: str) -> str:
    """``name`` in snake_case: ``GetWeather`` -> ``get_weather``, ``HTTPClient`` -> ``http_client``."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return name.lower()


def docstring_parts(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its summary and its ``Args:`` descriptions."""
    if not doc:
        return "", {}
    text = inspect.cleandoc(doc)
    summary_lines: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent: int | None = None
    for line in text.splitlines():
        stripped = line.strip()
        header = stripped.rstrip(":").lower()
        if stripped.endswith(":") and header in {"args", "arguments", "parameters", "params"}:
            section, current = "args", None
            continue
        if stripped.endswith(":") and header in {"returns", "return", "raises", "yields", "examples", "example"}:
            section, current = "other", None
            continue
        if section is None:
            summary_lines.append(line)
        elif section == "args" and stripped:
            match = re.match(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            depth = len(line) - len(line.lstrip())
            if match and (indent is None or depth <= indent):
                indent = depth
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
            elif current:
                params[current] = (params[current] + " " + stripped).strip()
    return "\n".join(summary_lines).strip(), params


def _type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to the raw ones
        return dict(getattr(fn, "__annotations__", {}))


def run_context_parameter(fn: Callable[..., Any], name: str) -> str | None:
    """The name of ``fn``'s :class:`~robotlab.RunContext` parameter, ``None`` without one (once per function).

    Raises:
        TypeError: a ``RunContext`` parameter that is not the first
            (see :func:`robotlab.run_context.context_parameter`).
    """
    try:
        hash(fn)
    except TypeError:  # an unhashable callable: looked at each time
        return context_parameter(fn, _type_hints(fn), name)
    return _run_context_parameter(fn, name)


@functools.lru_cache(maxsize=4096)
def _run_context_parameter(fn: Callable[..., Any], name: str) -> str | None:
    return context_parameter(fn, _type_hints(fn), name)


def signature_model(fn: Callable[..., Any], name: str, descriptions: dict[str, str]) -> type[pydantic.BaseModel]:
    """A pydantic model of ``fn``'s keyword parameters (``self``, ``*args`` and a ``RunContext`` excluded).

    Built once per function, name and descriptions: a robot built per request (as the Django app does) wraps
    the same functions again each time, and building the model took 1 ms a tool (benchmarks/peers.py).
    """
    described = tuple(sorted(descriptions.items()))
    try:
        return _signature_model(fn, name, described)
    except TypeError:  # an unhashable callable (a bound method of an unhashable object): built each time
        return _signature_model.__wrapped__(fn, name, described)


@functools.lru_cache(maxsize=4096)
def _signature_model(fn: Callable[..., Any], name: str,
                     described: tuple[tuple[str, str], ...]) -> type[pydantic.BaseModel]:
    import pydantic  # imported when the first function tool is defined, not at ``import robotlab``

    descriptions = dict(described)

    hints = _type_hints(fn)
    context = context_parameter(fn, hints, name)  # the run's context: never the model's to fill in
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.name in {"self", "cls", context} or param.kind in {param.VAR_POSITIONAL, param.VAR_KEYWORD}:
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, pydantic.Field(default, description=descriptions.get(param.name)))
    model_name = "".join(part.capitalize() for part in re.split(r"[^0-9a-zA-Z]+", name) if part) or "Tool"
    return pydantic.create_model(model_name + "Arguments", **fields)


@functools.lru_cache(maxsize=4096)
def model_schema(model: type[pydantic.BaseModel]) -> dict[str, Any]:
    """The cleaned JSON schema of an arguments model, computed once per model (0.6 ms a tool otherwise).

    The same dict is returned each time: treat it as read-only.
    """
    return clean_schema(model.model_json_schema())


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's ``title`` noise so the schema the model sees stays small."""

    def strip(node: object) -> Any:
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    cleaned: dict[str, Any] = strip(schema)
    cleaned.setdefault("type", "object")
    cleaned.setdefault("properties", {})
    return cleaned


def format_validation_error(error: pydantic.ValidationError) -> str:
    """The text the model sees for arguments that failed validation, one ``field: reason`` per error."""
    parts = []
    for item in error.errors():
        where = ".".join(str(p) for p in item.get("loc", ())) or "arguments"
        parts.append(f"{where}: {item.get('msg', 'invalid')}")
    return "invalid arguments: " + "; ".join(parts)
