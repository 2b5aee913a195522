"""A turn's finished results as :class:`~robotlab.network.turn.TurnState` stores them: read when needed, each once.

A distributed turn reads its whole state and writes it back at every task that finishes (one job per task, on
any worker), so the results of tasks the job never looks at were loaded and dumped again every time, and a fan-out
repeated its planner's result in the context of every branch (a 1 -> 8 -> 1 state held nine copies of it).
:class:`Results` keeps the stored form:

* a result is loaded (:func:`~robotlab.network.codec.load_flow`) when something asks for it, not before;
* :meth:`Results.dump` writes a result that was never loaded as it was read, and dumps only the others;
* a context entry equal to one that an earlier result already stores under the same key is stored as
  ``{"$same_as": "<that task>"}``, and read back as that entry's value. So the context of a branch names its
  planner's result instead of holding a copy; every result still loads with its whole context.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from ..task import FlowResult
from .codec import SAME_AS, dump_flow, load_flow

__all__ = ["Results"]


class _Stored:
    """A result as stored (its context may hold references to earlier results' entries), not loaded yet."""

    __slots__ = ("data", "refers")

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.refers = {value[SAME_AS] for _key, value in data.get("context") or []
                       if isinstance(value, Mapping) and SAME_AS in value}


class Results(MutableMapping[str, FlowResult]):
    """The finished results of a turn by task name, in finishing order, loaded on first access (module docs).

    Args:
        stored: ``(task, stored result)`` pairs as :meth:`dump` gives them (those of an older state too).
    """

    def __init__(self, stored: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> None:
        self._items: dict[str, FlowResult | _Stored] = {}
        self._raw: dict[str, Mapping[str, Any]] = {}  # the stored form of each result read from storage
        for name, data in stored:
            self._items[str(name)] = _Stored(data)
            self._raw[str(name)] = data

    def __getitem__(self, name: str) -> FlowResult:
        value = self._items[name]
        if isinstance(value, _Stored):
            value = self._items[name] = load_flow(self._expanded(value.data))
        return value

    def __setitem__(self, name: str, result: FlowResult) -> None:
        self._items[name] = result
        self._raw.pop(name, None)

    def __delitem__(self, name: str) -> None:
        del self._items[name]
        self._raw.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"<Results {list(self._items)}>"

    def _expanded(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """``data`` with its references replaced by the entries they name."""
        context = data.get("context") or []
        if not any(isinstance(value, Mapping) and SAME_AS in value for _key, value in context):
            return data
        return {**data, "context": [[key, self._entry(value[SAME_AS], key)
                                     if isinstance(value, Mapping) and SAME_AS in value else value]
                                    for key, value in context]}

    def _entry(self, name: str, key: str) -> Any:
        """The stored value of ``key`` in the context of the result ``name`` (read from storage)."""
        for entry_key, value in self._raw[name].get("context") or []:
            if entry_key == key:
                return value
        raise ValueError(f"The stored result of task '{name}' has no context entry {key!r} to refer to")

    def dump(self) -> list[list[Any]]:
        """``[[task, stored result], ...]``: each result as read when it was not loaded, else dumped anew.

        A context entry equal to a literal entry of the same key in an earlier result is stored as a reference to
        that result. A result read from storage whose references name a result loaded since is dumped anew.

        Raises:
            TypeError: a result holds a value that cannot be stored as JSON (see :func:`dump_flow`).
        """
        literals: dict[str, list[tuple[str, Any]]] = {}  # context key -> (task, stored value) of literal entries
        loaded = {name for name, value in self._items.items() if not isinstance(value, _Stored)}
        dumped: list[list[Any]] = []
        for name, value in self._items.items():
            if isinstance(value, _Stored) and not value.refers & loaded:
                data: Mapping[str, Any] = value.data
            else:
                flow = self[name]
                data = dump_flow(flow, where=f"task '{name}'", same_as=lambda key, stored: next(
                    (task for task, literal in literals.get(key, ()) if literal == stored), None))
                loaded.add(name)
            for key, stored in data.get("context") or []:
                if not (isinstance(stored, Mapping) and SAME_AS in stored):
                    literals.setdefault(key, []).append((name, stored))
            dumped.append([name, data])
        return dumped
