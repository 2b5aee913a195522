"""A memory as plain data and back: what ``Memory.to_dict``, ``Memory.from_dict`` and ``Memory.copy`` hold.

The saved form is ``{"data", "results", "messages", "session_id", "custom"}`` (``session_id``
left out when ``None``, ``custom`` the non-reserved keys, always there). The response cache,
subscriptions, waiters and documents are never saved.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Mapping
from typing import Any, Protocol

from ..messages import Message, _compact
from ..result import RobotResult
from .state import StateProxy

__all__ = ["constructor_arguments", "copy_arguments", "to_dict"]


class _Saved(Protocol):
    """What these functions read of a memory (:class:`~robotlab.memory.Memory` has it all)."""

    @property
    def data(self) -> StateProxy: ...
    @property
    def results(self) -> list[Any]: ...
    @property
    def messages(self) -> list[Message]: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def enable_cache(self) -> bool: ...
    @property
    def network_name(self) -> str | None: ...
    def keys(self) -> list[str]: ...
    def __getitem__(self, key: str) -> Any: ...


def to_dict(memory: _Saved) -> dict[str, Any]:
    """The saved form of ``memory`` (results exported, messages as dicts)."""
    custom = memory.keys()
    return _compact(
        {
            "data": memory.data.to_dict(),
            "results": [r.export() if hasattr(r, "export") else r for r in memory.results],
            "messages": [m.to_dict() for m in memory.messages],
            "session_id": memory.session_id,
            "custom": {key: memory[key] for key in custom},
        }
    )


def constructor_arguments(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Memory`` arguments that rebuild the reserved keys of a saved form (``custom`` is set after)."""
    return {
        "data": data.get("data") or {},
        "results": [RobotResult.from_dict(r) for r in data.get("results") or []],
        "messages": [Message.from_dict(m) for m in data.get("messages") or []],
        "session_id": data.get("session_id"),
    }


def copy_arguments(memory: _Saved) -> dict[str, Any]:
    """The ``Memory`` arguments of an independent copy of ``memory``'s reserved keys and settings.

    ``data`` is deep-copied; ``results`` and ``messages`` are new lists of the same objects.
    """
    return {
        "data": _copy.deepcopy(memory.data.to_dict()),
        "results": memory.results,
        "messages": memory.messages,
        "session_id": memory.session_id,
        "enable_cache": memory.enable_cache,
        "network_name": memory.network_name,
    }
