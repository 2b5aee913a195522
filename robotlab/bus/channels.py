"""The bus itself: :class:`MessageBus`, its named channels and their subscribers, and how handlers are called.

Delivery is asynchronous inside: async handlers run on the event loop that delivers, and plain functions
run in a worker thread (:func:`call_handler`), so either may block on a robot run.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import BusError
from ..runtime import run_sync
from .messages import Delivery

__all__ = ["Handler", "MessageBus", "call_handler"]

logger = logging.getLogger("robotlab")

Handler = Callable[..., Any]

#: Plain-function handlers run here, so a handler may block (on ``robot.run`` or a synchronous
#: ``send_message``) without holding the event loop or the loop's default executor.
_HANDLER_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="robotlab-bus")


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


async def call_handler(handler: Handler, *args: object) -> Any:
    """Await an async handler; run a plain one in a worker thread (awaiting what it returns, if awaitable)."""
    if _is_async(handler):
        return await handler(*args)
    context = contextvars.copy_context()
    result = await asyncio.get_running_loop().run_in_executor(
        _HANDLER_THREADS, functools.partial(context.run, handler, *args)
    )
    if inspect.isawaitable(result):
        result = await result
    return result


@dataclass
class _Channel:
    name: str
    type: type | None
    subscribers: dict[int, Handler] = field(default_factory=dict)


class MessageBus:
    """An in-process, thread-safe publish/subscribe bus of named (optionally typed) channels.

    A handler receives a :class:`Delivery`; it may be a coroutine function (run on the
    delivering event loop) or a plain function (run in a worker thread). A handler that raises
    is logged and its delivery nacked; the publisher is not affected.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: dict[str, _Channel] = {}
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()

    def add_channel(self, name: str, *, type: type | None = None) -> None:
        """Create channel ``name`` (a no-op when it exists); ``type`` restricts what is published on it."""
        with self._lock:
            self._channels.setdefault(str(name), _Channel(str(name), type))

    def remove_channel(self, name: str) -> None:
        """Remove a channel and its subscribers."""
        with self._lock:
            self._channels.pop(str(name), None)

    def has_channel(self, name: str) -> bool:
        """Whether channel ``name`` exists."""
        with self._lock:
            return str(name) in self._channels

    @property
    def channel_names(self) -> list[str]:
        """The names of the channels, in creation order."""
        with self._lock:
            return list(self._channels)

    def subscriber_count(self, channel: str) -> int:
        """How many handlers listen on ``channel`` (0 for an unknown channel)."""
        with self._lock:
            found = self._channels.get(str(channel))
            return len(found.subscribers) if found else 0

    def subscribe(self, channel: str, handler: Handler) -> int:
        """Call ``handler(delivery)`` for every message on ``channel`` (created if missing); returns an id."""
        with self._lock:
            name = str(channel)
            subscriber_id = next(self._ids)
            self._channels.setdefault(name, _Channel(name, None)).subscribers[subscriber_id] = handler
            return subscriber_id

    def unsubscribe(self, channel: str, subscriber: int | Handler) -> bool:
        """Remove a subscriber by its id or its handler; ``False`` when it was not subscribed."""
        with self._lock:
            found = self._channels.get(str(channel))
            if found is None:
                return False
            ids = [i for i, h in found.subscribers.items() if subscriber in (i, h)]
            for i in ids:
                del found.subscribers[i]
            return bool(ids)

    def _deliveries(self, channel: str, message: object) -> list[tuple[Handler, Delivery]]:
        name = str(channel)
        with self._lock:
            found = self._channels.get(name)
            if found is None:
                raise BusError(f"Unknown channel: {name}")
            if found.type is not None and not isinstance(message, found.type):
                expected, got = found.type.__name__, type(message).__name__
                raise TypeError(f"Expected {expected}, got {got} on channel '{name}'")
            subscribers = list(found.subscribers.items())
        if not subscribers:
            logger.warning("MessageBus: message published on channel '%s', which has no subscribers", name)
        return [(h, Delivery(message, channel=name, subscriber_id=i)) for i, h in subscribers]

    @staticmethod
    async def _notify(handler: Handler, delivery: Delivery) -> None:
        try:
            await call_handler(handler, delivery)
        except Exception as exc:
            delivery._nack_if_pending()
            logger.warning(
                "MessageBus: subscriber %d on channel '%s' raised %s: %s",
                delivery.subscriber_id, delivery.channel, type(exc).__name__, exc,
            )

    async def _deliver(self, targets: list[tuple[Handler, Delivery]]) -> None:
        await asyncio.gather(*(self._notify(handler, delivery) for handler, delivery in targets))

    async def apublish(self, channel: str, message: object) -> list[Delivery]:
        """Publish and wait until every subscriber's handler has returned; returns their deliveries.

        Raises:
            BusError: ``"Unknown channel: <name>"``.
            TypeError: the message is not of the channel's type.
        """
        targets = self._deliveries(channel, message)
        await self._deliver(targets)
        return [delivery for _, delivery in targets]

    def publish(self, channel: str, message: object) -> list[Delivery]:
        """Publish ``message`` to every subscriber of ``channel``; returns their deliveries.

        Without a running event loop in this thread, it waits until every handler has returned
        (delivering on RobotLab's background loop). Inside a running loop it schedules the
        delivery on that loop and returns at once (deliveries still pending); use :meth:`apublish`
        in coroutines.

        Raises:
            BusError: ``"Unknown channel: <name>"``.
            TypeError: the message is not of the channel's type.
        """
        targets = self._deliveries(channel, message)
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            run_sync(self._deliver(targets))
        elif targets:
            task = loop.create_task(self._deliver(targets))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return [delivery for _, delivery in targets]

    def __repr__(self) -> str:
        return f"<MessageBus channels={self.channel_names}>"
