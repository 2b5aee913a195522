"""Resolution of the ``"none"`` / ``"inherit"`` / list values used for ``tools`` and ``mcp``.

Every level of the hierarchy (global config, network, task, robot, run) may set ``tools``
and ``mcp`` to one of:

* ``"inherit"`` (:data:`INHERIT`): use whatever the parent level resolved to;
* ``None``, ``[]`` or ``"none"`` (:data:`NONE_VALUES`, and an empty tuple too): nothing at
  this level;
* anything else: exactly these entries (a single entry counts as a one-item list).

These are module functions, like RobotLab's ``ToolConfig`` module::

    from robotlab import tool_config

    tool_config.resolve("inherit", parent_value=["search", "fetch"])   # ["search", "fetch"]
    tool_config.resolve("none", parent_value=["search"])                 # []
    tool_config.resolve_tools(["search", get_weather], parent_value=[])  # ["search", "get_weather"]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .. import _ruby

__all__ = [
    "INHERIT",
    "NONE",
    "NONE_VALUES",
    "filter_tools",
    "is_inherit_value",
    "is_none_value",
    "resolve",
    "resolve_mcp",
    "resolve_tools",
]

NONE = "none"
"""Nothing at this level (Ruby ``:none``)."""

INHERIT = "inherit"
"""Use the parent level's value (Ruby ``:inherit``)."""

NONE_VALUES: tuple[Any, ...] = (None, [], NONE)
"""The values that mean "nothing at this level" (Ruby ``[nil, [], :none]``).

:func:`is_none_value` also accepts an empty tuple, the Python spelling of an empty list.
"""


def _entry_name(entry: object) -> str:
    """The name a tool entry is matched by.

    A string is used verbatim; an object with a ``name`` (a tool instance, a
    :class:`~robotlab.Tool` subclass, a descriptor) gives ``str(entry.name)``; anything else
    ``str(entry)``. So a ``Tool`` class matches its class-level name and an instance its
    own, as in RobotLab.
    """
    if isinstance(entry, str):
        return entry
    name = getattr(entry, "name", None)
    if name is not None:
        return str(name)
    return str(entry)


def is_none_value(value: object) -> bool:
    """Whether ``value`` means "nothing at this level": ``None``, ``[]``, ``()`` or ``"none"``."""
    if value is None:
        return True
    if isinstance(value, list | tuple):
        return len(value) == 0
    return isinstance(value, str) and value == NONE


def is_inherit_value(value: object) -> bool:
    """Whether ``value`` is ``"inherit"``."""
    return isinstance(value, str) and value == INHERIT


def resolve(value: object, *, parent_value: object) -> list[Any]:
    """Resolve one level's value against its parent's.

    * ``"inherit"`` gives the parent's value as a list (``None`` -> ``[]``, a list stays,
      a single value -> ``[value]``, like Ruby's ``Array()``);
    * ``None``, ``[]``, ``()`` and ``"none"`` give ``[]``;
    * anything else gives ``value`` as a list.

    ``parent_value`` is taken as it is: a parent of ``"none"`` that was never resolved
    gives ``["none"]`` (which then matches no tool), exactly as in RobotLab.
    """
    if is_inherit_value(value):
        return _ruby.array(parent_value)
    if is_none_value(value):
        return []
    return _ruby.array(value)


def resolve_mcp(value: object, *, parent_value: object) -> list[Any]:
    """:func:`resolve` for MCP server configs, which are kept as they are."""
    return resolve(value, parent_value=parent_value)


def resolve_tools(value: object, *, parent_value: object) -> list[str]:
    """:func:`resolve`, then every entry turned into a tool name.

    Ruby maps each entry through ``to_s``; here a string stays as it is and a tool object
    (or ``Tool`` class) becomes its ``name``, so an allowlist may mix names and tools.
    """
    return [_entry_name(entry) for entry in resolve(value, parent_value=parent_value)]


def filter_tools(tools: Iterable[Any], *, allowed_names: object) -> list[Any]:
    """The tools whose names are in ``allowed_names``, in the order of ``tools``.

    An empty allowlist means *no tools*: ``filter_tools(tools, allowed_names=[])`` is ``[]``,
    not every tool. (A robot treats an empty resolved allowlist as "no filter" before it
    gets here; an explicit ``tools="none"`` is handled by the caller.)

    Names are matched as strings: string entries verbatim, objects by ``str(obj.name)``
    (anything without a ``name`` by ``str(obj)``), on both sides.
    """
    allowed = {_entry_name(name) for name in _ruby.array(allowed_names)}
    if not allowed:
        return []
    return [tool for tool in _ruby.array(tools) if _entry_name(tool) in allowed]
