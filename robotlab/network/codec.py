"""JSON forms of the results a network turn keeps, so a turn's state can be stored and resumed elsewhere.

A task's :class:`~robotlab.task.FlowResult` becomes a plain dict (its ``run_params`` left out: every
process rebuilds them), a :class:`~robotlab.result.RobotResult` its :meth:`~robotlab.result.RobotResult.export`
form (with ``duration`` and ``delegated_by``), a nested network's FlowResult the same dict again. A value that
is the same object as one of the context entries (a robot step's value is its own RobotResult) is stored once,
as a reference, and is the same object again after :func:`load_flow`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..result import RobotResult
from ..task import FlowResult

__all__ = ["SAME_AS", "dump_flow", "dump_value", "load_flow", "load_value"]

_ROBOT = "$robot_result"
_FLOW = "$flow_result"
_REF = "$context_ref"
#: A stored context entry that is the same as the entry of that key in an earlier result of the turn.
SAME_AS = "$same_as"


def dump_value(value: object, *, where: str = "value") -> Any:
    """``value`` as JSON-ready data.

    Raises:
        TypeError: the value holds something else than results, dicts with string keys, lists, strings,
            numbers, booleans and ``None`` (``where`` names it).
    """
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, RobotResult):
        export = value.export()
        export["delegated_by"] = value.delegated_by
        return {_ROBOT: export}
    if isinstance(value, FlowResult):
        return {_FLOW: dump_flow(value, where=where)}
    if isinstance(value, Mapping):
        return {str(k): dump_value(v, where=f"{where}[{k!r}]") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [dump_value(v, where=f"{where}[{i}]") for i, v in enumerate(value)]
    raise TypeError(f"The network turn cannot store {where}: {type(value).__name__} {value!r} is not a result, "
                    "a dict, a list or a JSON scalar")


def load_value(data: Any) -> Any:
    """The value :func:`dump_value` stored."""
    if isinstance(data, Mapping):
        if _ROBOT in data:
            export = dict(data[_ROBOT])
            result = RobotResult.from_dict(export)
            result.duration = export.get("duration")
            result.delegated_by = export.get("delegated_by")
            return result
        if _FLOW in data:
            return load_flow(data[_FLOW])
        return {k: load_value(v) for k, v in data.items()}
    if isinstance(data, list):
        return [load_value(v) for v in data]
    return data


def dump_flow(result: FlowResult, *, where: str = "result",
              same_as: Callable[[str, Any], str | None] | None = None) -> dict[str, Any]:
    """``result`` as JSON-ready data, without its ``run_params``.

    ``same_as(key, stored)``, when given, names a result that already stores that context entry: the entry is then
    stored as ``{"$same_as": <that name>}`` (:class:`robotlab.network.stored.Results` reads it back).

    Raises:
        TypeError: a value cannot be stored (see :func:`dump_value`).
    """
    context = {k: v for k, v in result.context.items() if k != "run_params"}
    ref = next((k for k, v in context.items() if v is result.value and result.value is not None), None)
    entries = []
    for key, value in context.items():
        stored = dump_value(value, where=f"{where}.context[{key!r}]")
        owner = same_as(key, stored) if same_as is not None else None
        entries.append([key, stored if owner is None else {SAME_AS: owner}])
    return {
        "value": {_REF: ref} if ref is not None else dump_value(result.value, where=f"{where}.value"),
        "context": entries,
        "errors": {k: list(v) for k, v in result.errors.items()},
        "activated_steps": list(result.activated_steps),
        "continue": result.is_continue,
    }


def load_flow(data: Mapping[str, Any], run_params: Any = None) -> FlowResult:
    """The FlowResult :func:`dump_flow` stored; ``run_params``, when given, goes back into its context."""
    context: dict[str, Any] = {} if run_params is None else {"run_params": run_params}
    context.update((k, load_value(v)) for k, v in data.get("context") or [])
    value = data.get("value")
    value = context[value[_REF]] if isinstance(value, Mapping) and _REF in value else load_value(value)
    result = FlowResult(value, context=context, errors=data.get("errors"),
                        activated_steps=data.get("activated_steps") or ())
    return result if data.get("continue", True) else result.halt()
