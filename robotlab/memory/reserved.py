"""The five reserved keys of a memory and their rules: :data:`RESERVED_KEYS`, :class:`ReservedKeys`.

``data`` (a :class:`~robotlab.memory.state.StateProxy`), ``results`` (robot results),
``messages`` (conversation messages), ``session_id`` and ``cache`` always exist, cannot be
deleted, and stay in the process (a Redis memory keeps only its custom keys in Redis).
Assigning one is silent: no subscriber is called and no waiter wakes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..messages import Message
from ..messages import coerce_message as _message
from ..result import RobotResult
from .response_cache import ResponseCache
from .state import StateProxy

__all__ = ["RESERVED_KEYS", "ReservedKeys", "new_data"]

#: Keys with their own accessors; they always exist and cannot be deleted.
RESERVED_KEYS: tuple[str, ...] = ("data", "results", "messages", "session_id", "cache")


def _as_list(values: Any, single: tuple[type, ...]) -> list[Any]:
    """Ruby's ``Array(x)``: ``None`` is empty, one item of the ``single`` types is wrapped."""
    if values is None:
        return []
    if isinstance(values, single):
        return [values]
    return list(values)


def _result(item: Any) -> Any:
    return RobotResult.from_dict(item) if isinstance(item, Mapping) else item


def _results(values: Any) -> list[Any]:
    return [_result(r) for r in _as_list(values, (RobotResult, Mapping))]


def _messages(values: Any) -> list[Message]:
    return [_message(m) for m in _as_list(values, (Message, Mapping))]


def new_data(data: Any) -> StateProxy:
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

    def append_result(self, result: Any) -> None:
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
