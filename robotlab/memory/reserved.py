"""The five reserved keys of a memory and their rules: :data:`RESERVED_KEYS`, :class:`ReservedKeys`.

``data`` (a :class:`~robotlab.memory.state.StateProxy`), ``results`` (robot results),
``messages`` (conversation messages), ``session_id`` and ``cache`` always exist, cannot be
deleted, and stay in the process (a Redis memory keeps only its custom keys in Redis).
Assigning one is silent: no subscriber is called and no waiter wakes. :class:`ReservedAccess`, a base of
:class:`~robotlab.memory.Memory`, reads and assigns them as attributes and keeps the history.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from ..llm.cache import ResponseCache
from ..messages import Message
from ..messages import coerce_message as _message
from ..result import RobotResult
from .state import StateProxy

__all__ = ["RESERVED_KEYS", "ReservedAccess", "ReservedKeys", "new_data"]

#: Keys with their own accessors; they always exist and cannot be deleted.
RESERVED_KEYS: tuple[str, ...] = ("data", "results", "messages", "session_id", "cache")


def _as_list(values: Any, single: tuple[type, ...]) -> list[Any]:
    """Ruby's ``Array(x)``: ``None`` is empty, one item of the ``single`` types is wrapped."""
    if values is None:
        return []
    if isinstance(values, single):
        return [values]
    return list(values)


def _result(item: object) -> Any:
    return RobotResult.from_dict(item) if isinstance(item, Mapping) else item


def _results(values: object) -> list[Any]:
    return [_result(r) for r in _as_list(values, (RobotResult, Mapping))]


def _messages(values: object) -> list[Message]:
    return [_message(m) for m in _as_list(values, (Message, Mapping))]


def new_data(data: object) -> StateProxy:
    """A new :class:`StateProxy` holding ``data`` (``None`` is empty).

    Raises:
        TypeError: ``data`` is not a mapping.
    """
    if data is None:
        return StateProxy()
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a mapping, got {type(data).__name__}")
    return StateProxy(data)


class ReservedKeys:
    """The reserved keys of one memory.

    Args:
        lock: the memory's lock (guards ``results`` and ``messages``).
        data: the initial ``data`` mapping.
        results: robot results (:class:`~robotlab.result.RobotResult`, or their dicts).
        messages: conversation messages (:class:`~robotlab.messages.Message`, or their dicts).
        session_id: the conversation id.
        cache: the response cache, or ``None`` when caching is off.
    """

    def __init__(self, lock: threading.Lock, *, data: Mapping[str, Any] | None, results: Iterable[Any] | None,
                 messages: Iterable[Message | Mapping[str, Any]] | None, session_id: str | None,
                 cache: ResponseCache | None) -> None:
        self._lock = lock
        self.data = new_data(data)
        self._results: list[Any] = _results(results)
        self._messages: list[Message] = _messages(messages)
        self.session_id = session_id
        self.cache = cache

    @property
    def results(self) -> list[Any]:
        """A copy of the robot results."""
        with self._lock:
            return list(self._results)

    @property
    def messages(self) -> list[Message]:
        """A copy of the conversation messages."""
        with self._lock:
            return list(self._messages)

    def get(self, key: str) -> Any:
        """The value of the reserved ``key``."""
        return self.cache if key == "cache" else getattr(self, key)

    def assign(self, key: str, value: Any) -> None:
        """Replace the reserved ``key``: ``data`` gets a new proxy, ``results`` and ``messages`` become lists.

        Raises:
            ValueError: ``key`` is ``"cache"``.
            TypeError: ``data`` that is not a mapping, or a message that is neither a Message nor a dict.
        """
        if key == "data":
            self.data = new_data(value)
        elif key == "results":
            items = _results(value)
            with self._lock:
                self._results = items
        elif key == "messages":
            messages = _messages(value)
            with self._lock:
                self._messages = messages
        elif key == "session_id":
            self.session_id = value
        else:
            raise ValueError("Cannot reassign cache - it is initialized automatically")

    def append_result(self, result: object) -> None:
        """Add a robot result (or its dict)."""
        result = _result(result)
        with self._lock:
            self._results.append(result)

    def results_from(self, start_index: int) -> list[Any]:
        """The results from ``start_index`` on (``[]`` past the end)."""
        with self._lock:
            return self._results[start_index:]

    def reset(self) -> None:
        """Back to empty: ``data`` ``{}`` (a new proxy), no results or messages, no session id; the cache stays."""
        with self._lock:
            self._results = []
            self._messages = []
        self.data = StateProxy()
        self.session_id = None

    def format_history(self, formatter: Callable[[Any], Iterable[Any]] | None = None) -> list[Any]:
        """The messages followed by each result's ``formatter(result)`` items (default: output, then tool calls)."""
        history: list[Any] = self.messages
        for result in self.results:
            history.extend(formatter(result) if formatter is not None else [*result.output, *result.tool_calls])
        return history


class ReservedAccess:
    """The reserved keys of a :class:`~robotlab.memory.Memory` as attributes, and its history methods.

    Assigning one is silent, like ``memory[key] = value`` for a reserved key (see :class:`ReservedKeys`).
    """

    _reserved: ReservedKeys

    @property
    def data(self) -> StateProxy:
        """Runtime data. Writes through it are **not** reactive (no subscribers, no waiters)."""
        return self._reserved.data

    @data.setter
    def data(self, value: Mapping[str, Any] | None) -> None:
        self._reserved.assign("data", value)

    @property
    def results(self) -> list[Any]:
        """A copy of the robot results."""
        return self._reserved.results

    @results.setter
    def results(self, value: Iterable[Any] | None) -> None:
        self._reserved.assign("results", value)

    @property
    def messages(self) -> list[Message]:
        """A copy of the conversation messages."""
        return self._reserved.messages

    @messages.setter
    def messages(self, value: Iterable[Message | Mapping[str, Any]] | None) -> None:
        self._reserved.assign("messages", value)

    @property
    def session_id(self) -> str | None:
        """The conversation session id (``None`` when unset)."""
        return self._reserved.session_id

    @session_id.setter
    def session_id(self, value: str | None) -> None:
        self._reserved.session_id = value

    @property
    def cache(self) -> ResponseCache | None:
        """The shared response cache, or ``None`` when ``enable_cache=False``."""
        return self._reserved.cache

    def append_result(self, result: object) -> Self:
        """Add a robot result to :attr:`results` (not reactive); returns ``self``."""
        self._reserved.append_result(result)
        return self

    def set_results(self, results: Iterable[Any] | None) -> Self:
        """Replace :attr:`results` (when loading from persistence); returns ``self``."""
        self._reserved.assign("results", results)
        return self

    def results_from(self, start_index: int) -> list[Any]:
        """The results from ``start_index`` on (``[]`` past the end), for incremental saves."""
        return self._reserved.results_from(start_index)

    def format_history(self, formatter: Callable[[Any], Iterable[Any]] | None = None) -> list[Any]:
        """The messages, then each result's ``formatter(result)`` (default ``output + tool_calls``)."""
        return self._reserved.format_history(formatter)
