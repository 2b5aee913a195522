"""``memory.data``: :class:`StateProxy`, a ``str``-keyed mapping with attribute access.

Also :func:`check_key`, the one rule every memory key follows (keys are ``str``).
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

__all__ = ["StateProxy", "check_key"]


def check_key(key: object) -> str:
    """``key`` itself when it is a ``str``.

    Raises:
        TypeError: ``key`` is not a ``str`` (``"Memory keys must be str, got int: 1"``).
    """
    if not isinstance(key, str):
        raise TypeError(f"Memory keys must be str, got {type(key).__name__}: {key!r}")
    return key


class StateProxy(MutableMapping[str, Any]):
    """A ``str``-keyed mapping with attribute access and an optional change callback.

    ``memory.data`` is one. ``proxy["tier"]`` and ``proxy.tier`` read a key (a missing key reads
    as ``None`` through ``proxy["tier"]``, as in RobotLab, and raises ``AttributeError`` as an attribute);
    ``proxy["tier"] = "gold"`` and ``proxy.tier = "gold"`` write one. Method names (``keys``,
    ``items``, ...) are read as the methods, so use item access for such keys.

    Args:
        data: the initial contents (copied; keys must be ``str``).
        on_change: called as ``on_change(key, old, new)`` after a write that changes the value
            (``old`` is ``None`` for a new key; writing an equal value calls nothing; deleting
            calls nothing).
    """

    _data: dict[str, Any]
    _on_change: Callable[[str, Any, Any], Any] | None

    def __init__(self, data: Mapping[str, Any] | None = None, *,
                 on_change: Callable[[str, Any, Any], Any] | None = None) -> None:
        object.__setattr__(self, "_data", {})
        object.__setattr__(self, "_on_change", on_change)
        for key, value in (data or {}).items():
            self._data[check_key(key)] = value

    def __getitem__(self, key: str) -> Any:
        """The value of ``key``; a missing key reads as ``None``, as a Ruby hash does."""
        return self._data.get(key)

    def get(self, key: str, default: object = None) -> Any:
        """The value of ``key``, or ``default`` when it is missing."""
        return self._data.get(key, default)

    def pop(self, key: str, *default: object) -> Any:
        """Remove ``key`` and return its value (``default`` when missing, else ``KeyError``)."""
        return self._data.pop(key, *default)

    def setdefault(self, key: str, default: object = None) -> Any:
        """The value of ``key``, first setting it to ``default`` when it is missing."""
        if key not in self._data:
            self[key] = default
        return self._data[key]

    def __setitem__(self, key: str, value: object) -> None:
        check_key(key)
        old = self._data.get(key)
        self._data[key] = value
        if self._on_change is not None and not (old is value or old == value):
            self._on_change(key, old, value)

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("_"):
            data = self.__dict__.get("_data", {})
            if name in data:
                return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: object) -> None:
        if name.startswith("_"):
            object.__setattr__(self, name, value)
        else:
            self[name] = value

    def __delattr__(self, name: str) -> None:
        if name.startswith("_") or name not in self._data:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        del self._data[name]

    def has_key(self, key: str) -> bool:
        """Whether ``key`` is present."""
        return key in self._data

    def delete(self, key: str) -> Any:
        """Remove ``key`` and return its value (``None`` when it was missing)."""
        return self._data.pop(key, None)

    def merge(self, other: Mapping[str, Any]) -> StateProxy:
        """Write every pair of ``other`` (each may call ``on_change``); returns ``self``."""
        for key, value in other.items():
            self[key] = value
        return self

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the contents as a plain ``dict``."""
        return dict(self._data)

    def copy(self) -> StateProxy:
        """A deep copy with the same ``on_change``."""
        return StateProxy(_copy.deepcopy(self._data), on_change=self._on_change)

    def __copy__(self) -> StateProxy:
        return StateProxy(self._data, on_change=self._on_change)

    def __deepcopy__(self, memo: dict[int, Any]) -> StateProxy:
        return StateProxy(_copy.deepcopy(self._data, memo), on_change=self._on_change)

    @property
    def is_empty(self) -> bool:
        """Whether there are no keys."""
        return not self._data

    def __repr__(self) -> str:
        return f"StateProxy({self._data!r})"
