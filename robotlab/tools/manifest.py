"""A name-keyed collection of tools, and the global tool registry.

:class:`ToolManifest` is RobotLab's manifest: tools keyed by ``str(tool.name)``, looked up
by name, merged, serialized. Robots keep plain lists of tools; the manifest is for
applications that manage catalogues of tools::

    manifest = ToolManifest([get_weather, calculate])
    manifest["get_weather"]     # the tool, or None
    manifest.fetch("nope")      # ToolNotFoundError: "Tool not found: nope. Available tools: get_weather, ..."
    manifest.names              # ["get_weather", "calculate"]

:data:`tool_registry` is the registry of RobotLab's tool-manifest plan (as its review
narrowed it): a global :class:`ToolRegistry` of :class:`ToolDescriptor` entries (name and
description only, never a live tool) for the *selector robot* pattern, in which one robot
reads :meth:`ToolManifest.summary` of hundreds of tools and names the few the next robot
needs::

    prompt = json.dumps(robotlab.tool_registry.summary())       # [{"name": ..., "description": ...}, ...]
    names = ...                                                 # what the selector robot answered
    robotlab.tool_registry.select_by_names(names).names         # the known ones among them
    worker.run(message, tools=names)                            # the worker resolves its own live tools

Nothing is registered automatically (building a robot leaves the registry alone; MCP tools live and
die with their server connection): register the tools a selector should know. There are no tags.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .. import _ruby
from ..errors import ToolNotFoundError
from .base import Tool
from .resolution import _entry_name, filter_tools

__all__ = ["ToolDescriptor", "ToolManifest", "ToolRegistry", "tool_registry"]


@dataclass(frozen=True)
class ToolDescriptor:
    """What the registry knows about a tool: its name and description, and no way to call it."""

    name: str
    description: str = ""

    @classmethod
    def from_tool(cls, tool: object) -> ToolDescriptor:
        """The descriptor of a tool instance, a ``Tool`` subclass or another descriptor."""
        if isinstance(tool, ToolDescriptor):
            return tool
        return cls(name=_entry_name(tool), description=str(getattr(tool, "description", None) or ""))

    def to_dict(self) -> dict[str, Any]:
        """``name`` and ``description`` (omitted when empty), the shape of ``Tool.to_dict``."""
        if not self.description:
            return {"name": self.name}
        return {"name": self.name, "description": self.description}


def _key(name: object) -> str:
    return name if isinstance(name, str) else str(name)


def _tool_dict(tool: object) -> dict[str, Any]:
    to_dict = getattr(tool, "to_dict", None)
    if callable(to_dict) and not isinstance(tool, type):
        return dict(to_dict())
    return ToolDescriptor.from_tool(tool).to_dict()  # a Tool subclass, or an object without to_dict


class ToolManifest:
    """Tools keyed by ``str(tool.name)``; every lookup takes its argument through ``str`` too.

    Any object with a ``name`` can be stored: :class:`~robotlab.Tool` instances, ``Tool``
    subclasses, :class:`ToolDescriptor`. Adding a tool under a name already present replaces
    the entry in place. Iterating yields the tools (not names), in insertion order.

    Unlike a dict, ``manifest[name]`` returns ``None`` for an unknown name, as RobotLab's
    ``manifest[name]`` does; use :meth:`fetch` for a lookup that raises.
    """

    def __init__(self, tools: object = ()) -> None:
        self._tools: dict[str, Any] = {}
        for tool in _ruby.array(tools):
            self.add(tool)

    # -- adding and removing -------------------------------------------------------------
    def add(self, tool: object) -> ToolManifest:
        """Register ``tool`` under its name (replacing any tool of that name); returns ``self``."""
        name = getattr(tool, "name", None)
        if name is None:
            raise TypeError(f"cannot add {tool!r} to a ToolManifest: it has no name")
        self._tools[_key(name)] = tool
        return self

    def remove(self, name: object) -> Any | None:
        """Delete the tool called ``name`` and return it (``None`` when absent)."""
        return self._tools.pop(_key(name), None)

    def clear(self) -> ToolManifest:
        """Remove every tool; returns ``self``."""
        self._tools.clear()
        return self

    def replace(self, tools: object) -> ToolManifest:
        """Clear the manifest, then add ``tools`` (the whole collection is replaced); returns ``self``."""
        self.clear()
        for tool in _ruby.array(tools):
            self.add(tool)
        return self

    def merge(self, other: object) -> ToolManifest:
        """Add every tool of ``other`` to this manifest and return ``self`` (no copy is made).

        ``other`` is a :class:`ToolManifest`, a list (or other iterable) of tools, or a single
        tool; ``None`` adds nothing. Anything else raises :class:`TypeError` (RobotLab would
        silently ignore it).
        """
        if other is None:
            return self
        items: list[Any]
        if isinstance(other, ToolManifest):
            items = other.values
        elif getattr(other, "name", None) is not None:
            items = [other]
        elif isinstance(other, Iterable) and not isinstance(other, str | bytes | Mapping):
            items = list(other)
        else:
            raise TypeError(f"cannot merge {type(other).__name__} into a ToolManifest")
        for tool in items:
            self.add(tool)
        return self

    # -- lookup --------------------------------------------------------------------------
    def get(self, name: object, default: object = None) -> Any:
        """The tool called ``name``, or ``default``."""
        return self._tools.get(_key(name), default)

    def __getitem__(self, name: object) -> Any | None:
        """The tool called ``name``, or ``None`` (no ``KeyError``)."""
        return self._tools.get(_key(name))

    def fetch(self, name: object) -> Any:
        """The tool called ``name``; raises :class:`~robotlab.ToolNotFoundError` listing the known names."""
        try:
            return self._tools[_key(name)]
        except KeyError:
            available = ", ".join(self.names)
            raise ToolNotFoundError(f"Tool not found: {name}. Available tools: {available}") from None

    def has(self, name: object) -> bool:
        """Whether a tool called ``name`` is registered (also ``name in manifest``)."""
        return _key(name) in self._tools

    def __contains__(self, name: object) -> bool:
        return self.has(name)

    @property
    def names(self) -> list[str]:
        """The registered names, in insertion order."""
        return list(self._tools)

    @property
    def values(self) -> list[Any]:
        """The tools themselves, in insertion order."""
        return list(self._tools.values())

    @property
    def all(self) -> list[Any]:
        """Alias of :attr:`values`."""
        return self.values

    def to_list(self) -> list[Any]:
        """The tools as a new list (Ruby ``to_a``)."""
        return self.values

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def size(self) -> int:
        """The number of tools (also ``len(manifest)``)."""
        return len(self._tools)

    @property
    def is_empty(self) -> bool:
        """Whether there are no tools."""
        return not self._tools

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.names!r}>"

    # -- the selector pattern ------------------------------------------------------------
    def summary(self) -> list[dict[str, str]]:
        """``[{"name": ..., "description": ...}, ...]``: what a selector robot reasons over.

        A missing description is ``""``; no schemas are included.
        """
        return [
            {"name": name, "description": str(getattr(tool, "description", None) or "")}
            for name, tool in self._tools.items()
        ]

    def select_by_names(self, names: object) -> ToolManifest:
        """A new :class:`ToolManifest` of the tools called ``names`` (this manifest is unchanged).

        The tool-manifest plan maps this onto ``tool_config.filter_tools``, so it follows the
        same rules: names that are not registered are skipped (a selector robot may answer
        a name that does not exist), the order is this manifest's, and an empty list selects
        nothing. ``names`` may be a single name, and may hold tools instead of names.
        """
        return ToolManifest(filter_tools(self.values, allowed_names=names))

    # -- serialization -------------------------------------------------------------------
    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``{name: tool.to_dict()}``: for a ``Tool``, its name, description and ``mcp``."""
        return {name: _tool_dict(tool) for name, tool in self._tools.items()}

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[Any, Mapping[str, Any]]) -> ToolManifest:
        """Build a manifest of ``Tool.create`` tools from ``{name: config}``.

        Each config may hold ``description``, ``parameters`` (a JSON schema) and ``handler``
        (a callable that receives the arguments dict).

        This is **not** the inverse of :meth:`to_dict`: ``to_dict`` emits no parameters and
        no handler, so a round trip gives tools with an empty schema whose calls answer
        ``"Error (<name>): tool has no handler"``.
        """
        return cls([
            Tool.create(name=_key(name), description=config.get("description"),
                        parameters=config.get("parameters"), handler=config.get("handler"))
            for name, config in data.items()
        ])


class ToolRegistry(ToolManifest):
    """A :class:`ToolManifest` of :class:`ToolDescriptor` entries that is safe to share between threads.

    Use :data:`tool_registry`, the process-wide instance. Everything added is stored as a
    descriptor, so the registry never keeps a tool, its robot or a connection alive.
    """

    def __init__(self, tools: object = ()) -> None:
        self._lock = threading.RLock()
        super().__init__(tools)

    def add(self, tool: object) -> ToolRegistry:
        """Register the descriptor of ``tool``; returns ``self``."""
        self.register(tool)
        return self

    def register(self, tool: object) -> ToolDescriptor:
        """Store the descriptor of ``tool`` (a ``Tool``, a ``Tool`` subclass or a descriptor) and return it.

        Registering a name again replaces its descriptor. Robots call this for their local
        tools when they are built; MCP tools should not be registered.
        """
        if getattr(tool, "name", None) is None:
            raise TypeError(f"cannot register {tool!r}: it has no name")
        descriptor = ToolDescriptor.from_tool(tool)
        with self._lock:
            self._tools[descriptor.name] = descriptor
        return descriptor

    def remove(self, name: object) -> ToolDescriptor | None:
        """:meth:`ToolManifest.remove`, under the lock."""
        with self._lock:
            return super().remove(name)

    def clear(self) -> ToolRegistry:
        """:meth:`ToolManifest.clear`, under the lock."""
        with self._lock:
            super().clear()
        return self

    def replace(self, tools: object) -> ToolRegistry:
        """:meth:`ToolManifest.replace`, under the lock."""
        with self._lock:
            super().replace(tools)
        return self

    def merge(self, other: object) -> ToolRegistry:
        """:meth:`ToolManifest.merge`, under the lock."""
        with self._lock:
            super().merge(other)
        return self

    @property
    def names(self) -> list[str]:
        """The tool names, in the order they were added."""
        with self._lock:
            return list(self._tools)

    @property
    def values(self) -> list[Any]:
        """The tools, in the order they were added."""
        with self._lock:
            return list(self._tools.values())

    def summary(self) -> list[dict[str, str]]:
        """:meth:`ToolManifest.summary`, under the lock."""
        with self._lock:
            return super().summary()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """:meth:`ToolManifest.to_dict`, under the lock."""
        with self._lock:
            return super().to_dict()


tool_registry = ToolRegistry()
"""The process-wide registry of tool descriptors (RobotLab's planned ``RobotLab.tool_registry``)."""
