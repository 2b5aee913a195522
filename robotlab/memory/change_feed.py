"""Hearing other processes' memory writes: one Redis pub/sub connection and thread per process and URL.

A Redis memory publishes each reactive write on its namespace's channel
(:meth:`~robotlab.memory.redis_backend.RedisBackend.swap`). A :class:`ChangeFeed` subscribes
to the channels of the memories of this process that wait for keys or have subscribers, reads
the messages on a daemon thread, and passes each change to those memories (except the one that
wrote it). A memory then wakes its waiters and calls its subscribers.

The wire format is one JSON object per change: ``{"o": origin, "k": key, "w": writer, "n":
network_name, "t": timestamp, "v": value, "p": previous}``; :func:`message_prefix` builds all
but the previous value, which the server-side write script appends.

The feeds are per process: a forked child starts with none (``os.register_at_fork``) and
creates its own on first use.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import weakref
from datetime import UTC, datetime
from typing import Any

from ..errors import ConfigurationError
from .changes import ChangeListener, MemoryChange

__all__ = ["SUBSCRIBE_TIMEOUT", "ChangeFeed", "change_feed", "decode_change", "message_prefix"]

logger = logging.getLogger("robotlab.memory")

#: Seconds to wait for Redis to confirm a channel subscription.
SUBSCRIBE_TIMEOUT = 5.0


def message_prefix(origin: str, key: str, encoded: str, *, writer: str | None,
                   network_name: str | None) -> str:
    """The change message for ``key`` up to ``"p":`` (the write script appends the previous value and ``}``)."""
    head = {"o": origin, "k": key, "w": writer, "n": network_name, "t": datetime.now(UTC).isoformat()}
    return json.dumps(head, separators=(",", ":"), ensure_ascii=False)[:-1] + f',"v":{encoded},"p":'


def decode_change(data: str) -> tuple[str, MemoryChange]:
    """``(origin, change)`` from one published message.

    Raises:
        ValueError: ``data`` is not a change message.
    """
    try:
        fields = json.loads(data)
        change = MemoryChange(key=fields["k"], value=fields["v"], previous=fields["p"], writer=fields["w"],
                              network_name=fields["n"], timestamp=fields["t"])
        return str(fields["o"]), change
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"Not a memory change message: {data[:200]!r} ({exc})") from exc


class ChangeFeed:
    """The pub/sub connection of one Redis server in this process, and its reader thread.

    Args:
        client: the ``redis.Redis`` client (``decode_responses=True``) to open the connection from.
    """

    def __init__(self, client: Any) -> None:
        self._pubsub = client.pubsub()
        self._lock = threading.RLock()  # reentrant: a memory's finalizer may call remove() from any point
        self._listeners: dict[str, dict[str, weakref.WeakMethod[ChangeListener]]] = {}
        self._confirmed: dict[str, threading.Event] = {}
        self._thread: threading.Thread | None = None

    def add(self, channel: str, origin: str, listener: ChangeListener, timeout: float = SUBSCRIBE_TIMEOUT) -> None:
        """Pass the changes published on ``channel`` by others than ``origin`` to the bound method ``listener``.

        Returns once Redis has confirmed the subscription.

        Raises:
            ConfigurationError: Redis did not confirm it within ``timeout`` seconds.
        """
        with self._lock:
            listeners = self._listeners.setdefault(channel, {})
            listeners[origin] = weakref.WeakMethod(listener)
            confirmed = self._confirmed.get(channel)
            if confirmed is None:
                confirmed = self._confirmed[channel] = threading.Event()
                try:
                    self._pubsub.subscribe(channel)
                except Exception as exc:
                    del self._listeners[channel], self._confirmed[channel]
                    raise ConfigurationError(f"Cannot subscribe to {channel!r} in Redis to hear other processes' "
                                             f"memory writes: {exc}") from exc
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="robotlab-memory-feed", daemon=True)
                self._thread.start()
        if not confirmed.wait(timeout):
            self.remove(channel, origin)
            raise ConfigurationError(f"Redis did not confirm the subscription to {channel!r} within {timeout} "
                                     "seconds; is the server reachable?")

    def remove(self, channel: str, origin: str) -> None:
        """Stop passing ``channel``'s changes to ``origin``'s listener (unsubscribes when it was the last)."""
        with self._lock:
            listeners = self._listeners.get(channel)
            if listeners is None or listeners.pop(origin, None) is None or listeners:
                return
            del self._listeners[channel]
            self._confirmed.pop(channel, None)
            try:
                self._pubsub.unsubscribe(channel)
            except Exception as exc:  # the connection is gone: nothing to unsubscribe from
                logger.debug("Could not unsubscribe from %s: %s", channel, exc)

    def channels(self) -> list[str]:
        """The channels listened to."""
        with self._lock:
            return list(self._listeners)

    def _run(self) -> None:
        pause = 0.0
        idle = threading.Event()  # never set: its wait is the pause between reconnection attempts
        while True:
            try:
                message = self._pubsub.get_message(timeout=1.0)
            except Exception as exc:  # the connection broke: redis-py resubscribes on reconnect
                (logger.debug if pause else logger.warning)(
                    "Memory change feed lost its Redis connection (%s); reconnecting", exc)
                pause = min(max(pause * 2, 0.1), 5.0)
                idle.wait(pause)
                continue
            pause = 0.0
            if message is not None:
                self._handle(message)

    def _handle(self, message: dict[str, Any]) -> None:
        kind, channel = message.get("type"), message.get("channel")
        if kind == "subscribe":
            with self._lock:
                confirmed = self._confirmed.get(channel)  # type: ignore[arg-type]
            if confirmed is None:
                return
            if confirmed.is_set():  # a resubscription after a reconnect: changes may have been missed
                self._deliver(channel, None, None)  # type: ignore[arg-type]
            confirmed.set()
        elif kind == "message":
            try:
                origin, change = decode_change(message["data"])
            except ValueError as exc:
                logger.warning("%s", exc)
                return
            self._deliver(channel, origin, change)  # type: ignore[arg-type]

    def _deliver(self, channel: str, origin: str | None, change: MemoryChange | None) -> None:
        with self._lock:
            targets = list(self._listeners.get(channel, {}).items())
        for target_origin, reference in targets:
            listener = reference()
            if target_origin == origin or listener is None:
                continue
            try:
                listener(change)
            except Exception:
                logger.exception("Memory change listener failed on %s", channel)


_feeds_lock = threading.Lock()
_feeds: dict[str, ChangeFeed] = {}


def change_feed(url: str, client: Any) -> ChangeFeed:
    """The feed of this process for the Redis server at ``url`` (created on first use)."""
    with _feeds_lock:
        feed = _feeds.get(url)
        if feed is None:
            feed = _feeds[url] = ChangeFeed(client)
        return feed


def _forget_feeds_after_fork() -> None:
    global _feeds_lock
    _feeds_lock = threading.Lock()
    _feeds.clear()


os.register_at_fork(after_in_child=_forget_feeds_after_fork)
