"""One serializer for the data model: messages, results and stream events.

A :class:`Record` is a dataclass that says, in class attributes, what its dict form holds;
``to_dict``, ``to_json`` and ``from_dict`` are written once, here::

    @dataclass
    class Point(Record):
        _wire: ClassVar[tuple[str, ...]] = ("x", "y")
        x: int
        y: int | None = None

    Point(1).to_dict()              # {'x': 1, 'y': None}
    Point.from_dict({"x": 1})       # Point(x=1, y=None)

The dict form is what RobotLab's Ruby classes give with ``to_h`` (key order included) and JSON is
compact, as Ruby's ``to_json``; results' checksums are taken over it, so it must not drift.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Any, ClassVar, Self

__all__ = ["Record", "compact", "dumps", "iso8601", "string_keys", "symbol_name"]


def dumps(value: object) -> str:
    """Compact JSON, like Ruby's ``to_json``: no spaces, UTF-8 kept, unknown objects as ``str()``."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def symbol_name(value: object) -> Any:
    """An ``Enum`` member becomes its value (a Ruby symbol becomes its name); anything else is kept."""
    return value.value if isinstance(value, Enum) else value


def string_keys(data: Mapping[Any, Any]) -> dict[str, Any]:
    """A copy of ``data`` with string keys (Ruby's ``transform_keys(&:to_sym)``)."""
    return {str(symbol_name(key)): value for key, value in data.items()}


def compact(data: dict[str, Any]) -> dict[str, Any]:
    """Drop ``None`` values only (Ruby's ``Hash#compact``); ``False``, ``0`` and ``""`` stay."""
    return {key: value for key, value in data.items() if value is not None}


def iso8601(moment: datetime) -> str:
    """Ruby's ``Time#iso8601``: seconds precision with the UTC offset."""
    return moment.isoformat(timespec="seconds")


#: Types kept as they are in a dict form (checked first: an event is serialized per streamed batch).
_PLAIN = frozenset({str, int, float, bool, type(None), dict})


def _encode(value: object) -> Any:
    """A value as it appears in a dict form: records and times converted, lists item by item."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, datetime):
        return iso8601(value)
    if isinstance(value, list):
        return [item.to_dict() if hasattr(item, "to_dict") else item for item in value]
    return value


class Record:
    """Base class of the dataclasses of the data model, giving them one serializer.

    A subclass describes its dict form with class attributes:

    * ``_wire``: the keys, in order; each is read with ``getattr`` (a property works too).
    * ``_compact``: drop the ``None`` values (Ruby's ``Hash#compact``).
    * ``_spread``: the name of a dict attribute whose items are added at the top level (an
      event's payload), and which ``from_dict`` fills with the keys ``_wire`` does not name.
    * ``_omit_zero``: keys dropped when their value is not positive (token counts).
    * ``_aliases``: other key names ``from_dict`` accepts for an argument, ``{"arguments": "input"}``.
    * ``_not_restored``: constructor arguments ``from_dict`` leaves at their default.

    Values are converted on the way out: a record by its ``to_dict``, a ``datetime`` to ISO 8601
    (seconds), a list item by item (items with a ``to_dict`` through it); anything else is kept.
    """

    __slots__ = ()

    _wire: ClassVar[tuple[str, ...]] = ()
    _compact: ClassVar[bool] = False
    _spread: ClassVar[str | None] = None
    _omit_zero: ClassVar[frozenset[str]] = frozenset()
    _aliases: ClassVar[Mapping[str, str]] = {}
    _not_restored: ClassVar[frozenset[str]] = frozenset()

    def _dict_of(self, keys: tuple[str, ...]) -> dict[str, Any]:
        """The dict form restricted to ``keys`` (in their order), spread and compacted as the class says."""
        data = {key: getattr(self, key) for key in keys}
        for key, value in data.items():
            if type(value) not in _PLAIN:
                data[key] = _encode(value)
        if self._omit_zero:
            for key in self._omit_zero & data.keys():
                if not (data[key] or 0) > 0:
                    data[key] = None
        if self._spread is not None:
            data.update(getattr(self, self._spread))
        return compact(data) if self._compact else data

    def to_dict(self) -> dict[str, Any]:
        """The dict form: the keys of ``_wire`` in order (see the class docstring)."""
        return self._dict_of(self._wire)

    def to_json(self) -> str:
        """``to_dict()`` as compact JSON."""
        return dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[Any, Any]) -> Self:
        """Rebuild a record from its dict form (keys may be strings or ``Enum`` members).

        Every constructor argument is read under its own name (or an alias); a missing one is
        passed as ``None``, which the constructor turns into its default.
        """
        return cls._from_keys(string_keys(data))

    @classmethod
    def _from_keys(cls, data: dict[str, Any]) -> Self:
        arguments: dict[str, Any] = {}
        for name in _arguments(cls):
            value = data.get(name)
            if value is None:
                for alias, target in cls._aliases.items():
                    if target == name and data.get(alias) is not None:
                        value = data[alias]
                        break
            arguments[name] = value
        if cls._spread is not None:
            known = set(cls._wire)
            arguments[cls._spread] = {key: value for key, value in data.items() if key not in known}
        return cls(**arguments)


_ARGUMENTS: dict[type, tuple[str, ...]] = {}


def _arguments(cls: type[Record]) -> tuple[str, ...]:
    """The constructor arguments ``from_dict`` restores: the init fields but ``_not_restored`` and ``_spread``."""
    names = _ARGUMENTS.get(cls)
    if names is None:
        skipped = cls._not_restored | {cls._spread}
        names = tuple(
            field.name for field in dataclasses.fields(cls) if field.init and field.name not in skipped  # type: ignore[arg-type]
        )
        _ARGUMENTS[cls] = names
    return names
