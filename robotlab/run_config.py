"""RunConfig: the shareable settings of a run, layered global > network > task > robot > call.

``merge`` returns a new config where the other side's set values win; ``None`` means unset
(``0``, ``0.0`` and ``""`` are set values).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from .templates import LLM_FIELDS

__all__ = ["CALLBACK_FIELDS", "FIELDS", "INFRA_FIELDS", "NON_SERIALIZABLE_FIELDS", "TOOL_FIELDS", "RunConfig"]

TOOL_FIELDS = ("mcp", "tools")
CALLBACK_FIELDS = ("on_tool_call", "on_tool_result", "on_content")
INFRA_FIELDS = (
    "bus",
    "enable_cache",
    "max_tool_rounds",
    "token_budget",
    "cost_budget",
    "ractor_pool_size",
    "max_concurrent_robots",
    "doom_loop_threshold",
    "auto_compact",
    "compact_threshold",
    "max_tools",
)
FIELDS = (*LLM_FIELDS, *TOOL_FIELDS, *CALLBACK_FIELDS, *INFRA_FIELDS)
NON_SERIALIZABLE_FIELDS = (*CALLBACK_FIELDS, "bus", "auto_compact")


class RunConfig:
    """A set of run settings; unknown names raise ``ValueError("Unknown RunConfig field: <f>")``.

    Each field reads as an attribute (``None`` when unset) and is written with :meth:`set` or by
    assignment (``config.max_tokens = None`` clears it). The field categories are class constants,
    as in RobotLab; ``ractor_pool_size`` is accepted for parity and has no effect in Python.
    """

    __slots__ = ("_values",)

    LLM_FIELDS: ClassVar[tuple[str, ...]] = LLM_FIELDS
    TOOL_FIELDS: ClassVar[tuple[str, ...]] = TOOL_FIELDS
    CALLBACK_FIELDS: ClassVar[tuple[str, ...]] = CALLBACK_FIELDS
    INFRA_FIELDS: ClassVar[tuple[str, ...]] = INFRA_FIELDS
    FIELDS: ClassVar[tuple[str, ...]] = FIELDS
    NON_SERIALIZABLE_FIELDS: ClassVar[tuple[str, ...]] = NON_SERIALIZABLE_FIELDS

    def __init__(self, **values: object) -> None:
        self._values: dict[str, Any] = {}
        for name, value in values.items():
            self.set(name, value)

    def set(self, name: str, value: object) -> RunConfig:
        """Set a field (``None`` deletes it) and return self."""
        if name not in FIELDS:
            raise ValueError(f"Unknown RunConfig field: {name}")
        if value is None:
            self._values.pop(name, None)
        else:
            self._values[name] = value
        return self

    def get(self, name: str, default: object = None) -> Any:
        """A field's value, or ``default`` when unset."""
        if name not in FIELDS:
            raise ValueError(f"Unknown RunConfig field: {name}")
        return self._values.get(name, default)

    def __getattr__(self, name: str) -> Any:
        if name in FIELDS:
            return self._values.get(name)
        raise AttributeError(name)

    def __setattr__(self, name: str, value: object) -> None:
        if name == "_values":
            object.__setattr__(self, name, value)
        else:
            self.set(name, value)

    def has(self, name: str) -> bool:
        """Whether ``name`` is set."""
        return name in self._values

    __contains__ = has

    @property
    def is_empty(self) -> bool:
        """Whether no field is set."""
        return not self._values

    def merge(self, other: RunConfig | Mapping[str, Any] | None) -> RunConfig:
        """A new config: this one overlaid by ``other``'s set values."""
        merged = RunConfig(**self._values)
        items = other.to_dict() if isinstance(other, RunConfig) else dict(other or {})
        for name, value in items.items():
            if value is not None:
                merged.set(name, value)
        return merged

    def to_dict(self) -> dict[str, Any]:
        """The set fields."""
        return dict(self._values)

    def to_json_dict(self) -> dict[str, Any]:
        """The set fields that can be serialized (callbacks, bus and auto_compact left out)."""
        return {k: v for k, v in self._values.items() if k not in NON_SERIALIZABLE_FIELDS}

    def to_json(self) -> str:
        """:meth:`to_json_dict` as JSON."""
        return json.dumps(self.to_json_dict(), default=str)

    @classmethod
    def from_front_matter(cls, metadata: Mapping[str, Any]) -> RunConfig:
        """The LLM, ``mcp`` and ``tools`` keys of a template's front matter."""
        return cls(**{k: metadata[k] for k in (*LLM_FIELDS, *TOOL_FIELDS) if metadata.get(k) is not None})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunConfig) and other._values == self._values

    def __hash__(self) -> int:  # configs are mutable; identity hashing keeps them usable as dict keys
        return id(self)

    def __repr__(self) -> str:
        return f"RunConfig({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"
