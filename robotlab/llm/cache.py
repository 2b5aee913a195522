"""The LLM response cache behind ``memory.cache``: :class:`ResponseCache` and the process-wide instance."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["ResponseCache", "shared_cache"]


class ResponseCache:
    """A small thread-safe LRU cache: what ``memory.cache`` returns when caching is enabled.

    RobotLab's ``memory.cache`` is RubyLLM's process-wide semantic cache. This port keeps the
    slot with an exact-match cache shared by every memory of the process (a semantic cache can
    be put behind the same methods). Keys are any hashable value, typically a prompt.

    Args:
        max_entries: the least recently used entry is dropped past this size.
    """

    def __init__(self, max_entries: int = 1024) -> None:
        self.max_entries = max_entries
        self._lock = threading.Lock()
        self._entries: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any, default: object = None) -> Any:
        """The cached value for ``key``, else ``default``."""
        with self._lock:
            if key not in self._entries:
                return default
            self._entries.move_to_end(key)
            return self._entries[key]

    def set(self, key: Any, value: object) -> Any:
        """Cache ``value`` under ``key`` and return it."""
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return value

    def fetch(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The cached value for ``key``, or ``compute()`` stored and returned."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
        return self.set(key, compute())

    def delete(self, key: Any) -> Any:
        """Drop ``key`` and return its value (``None`` when missing)."""
        with self._lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._entries.clear()

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


#: The cache every memory of the process shares (``memory.cache`` when ``enable_cache=True``).
shared_cache = ResponseCache()
