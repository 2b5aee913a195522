"""A thread's live group: its name, the channel layer, and sending a run's batches to it.

Every batch of a run's events (:mod:`robotlab_django.streaming.event_stream`) goes to the group
:func:`thread_group` (``<prefix>.thread.<pk>``, the prefix the project's own: :func:`group_prefix`) as one
channel-layer message::

    {"type": "robotlab.events", "thread": <thread pk>, "result": <RobotResult pk>, "prev": <cursor>,
     "t_emit": <Unix time>, "events": [<event>, ...]}

Publishing is at-most-once: a failed send, or one still pending after
``ROBOTLAB["STREAM_PUBLISH_TIMEOUT"]`` seconds (a hung Redis), is logged and cancelled, never raised.
``SWEEP_DELAY`` seconds after a run's last batch one more message goes out with no events and the
run's last cursor as ``prev``: the sweep, which lets a consumer whose copy of the last batch was lost
read it from the rows (see :class:`~robotlab_django.chat.consumers.ThreadConsumer`).

Sends go out on the loop of the caller (RobotLab's loop for a sync caller, so one connection pool
serves every flush), except with the in-memory layer: its queues belong to the loop this process's
websocket consumers run on (:func:`register_consumer_loop`), so its messages are sent there and the
consumer wakes at once.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from django.utils.crypto import salted_hmac

from robotlab.runtime import get_loop
from robotlab_django.conf import app_settings

__all__ = ["MESSAGE_TYPE", "SWEEP_DELAY", "ChannelLayer", "get_layer", "group_prefix", "group_send", "last_cursor",
           "message", "publish", "register_consumer_loop", "sweep_later", "thread_group"]

logger = logging.getLogger("robotlab_django")

#: The ``type`` of the channel-layer messages (handled by ``ThreadConsumer.robotlab_events``).
MESSAGE_TYPE = "robotlab.events"
#: Seconds after a run's last batch that its sweep goes out: a message with no events and the run's
#: last cursor as ``prev``, so a consumer whose copy of the last batch was lost still gets it.
SWEEP_DELAY = 1.0


def group_prefix() -> str:
    """The project's prefix of the app's group names: ``ROBOTLAB["GROUP_PREFIX"]``, else one from ``SECRET_KEY``.

    Redis pub/sub ignores the database number, so two projects whose channel layers share a Redis (on any
    database numbers, with the same channel-layer prefix) would otherwise share ``robotlab.thread.1``. The
    derived prefix, ``robotlab.<12 hex digits>`` (an HMAC of ``SECRET_KEY``, which reveals nothing of it),
    is the same in every process of one project, web and workers, and differs between projects.
    """
    configured = app_settings.GROUP_PREFIX
    if configured:
        return str(configured)
    return "robotlab." + salted_hmac("robotlab_django.streaming.broadcast.group_prefix", "group names").hexdigest()[:12]


class ChannelLayer(Protocol):
    """What the app uses of a Channels channel layer (``channels`` ships no types): its group operations."""

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        """Send ``message`` to every channel in ``group``."""

    async def group_add(self, group: str, channel: str) -> None:
        """Add ``channel`` to ``group``."""

    async def group_discard(self, group: str, channel: str) -> None:
        """Remove ``channel`` from ``group``."""


def thread_group(thread_id: int) -> str:
    """The channel-layer group of a thread's live events: ``<group_prefix()>.thread.<pk>``."""
    return f"{group_prefix()}.thread.{thread_id}"


def get_layer() -> ChannelLayer | None:
    """The default channel layer, or ``None`` when ``CHANNEL_LAYERS`` configures none."""
    from channels.layers import get_channel_layer

    layer: ChannelLayer | None = get_channel_layer()
    return layer


def message(thread_id: int, result_id: int, prev: int, payload: list[dict[str, Any]],
            emitted: float) -> dict[str, Any]:
    """The channel-layer message of one batch (``payload``: the events' wire dicts) of run ``result_id``."""
    return {"type": MESSAGE_TYPE, "thread": thread_id, "result": result_id, "prev": prev, "t_emit": emitted,
            "events": payload}


def last_cursor(payload: list[dict[str, Any]], prev: int) -> int:
    """The cursor a consumer has reached after ``payload`` (``prev`` when nothing in it was stored)."""
    return max([prev, *(int(event["cursor"]) for event in payload if isinstance(event.get("cursor"), int))])


_consumer_loop: asyncio.AbstractEventLoop | None = None


def register_consumer_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Remember the event loop this process's websocket consumers run on (``ThreadConsumer`` calls it).

    The in-memory layer's queues belong to that loop: a run on another loop (a sync caller's, on
    RobotLab's loop) publishes on it, so the consumer wakes at once instead of at its loop's next
    unrelated event.
    """
    global _consumer_loop
    _consumer_loop = loop


def _is_memory(layer: ChannelLayer) -> bool:
    from channels.layers import InMemoryChannelLayer

    return isinstance(layer, InMemoryChannelLayer)


def _home(layer: ChannelLayer) -> asyncio.AbstractEventLoop | None:
    """The loop ``layer``'s sends belong on when it is not the running one.

    The consumers' loop of an in-memory layer, if registered and running; else ``None`` (the running loop).
    """
    loop = _consumer_loop
    if not _is_memory(layer) or loop is None or loop.is_closed() or not loop.is_running():
        return None
    return None if loop is asyncio.get_running_loop() else loop


def _publish_timeout() -> float:
    return float(app_settings.STREAM_PUBLISH_TIMEOUT)


async def _send(layer: ChannelLayer, message: dict[str, Any]) -> None:
    """``group_send`` ``message`` to its thread's group.

    A failure, or a send still pending after ``ROBOTLAB["STREAM_PUBLISH_TIMEOUT"]`` seconds (a hung Redis, then
    cancelled), is logged, not raised: the layer is at-most-once anyway, and the rows, ``prev`` and the sweep cover
    the gap.
    """
    await _send_to(layer, thread_group(message["thread"]), message)


def _what(message: dict[str, Any], group: str) -> str:
    if message.get("type") == MESSAGE_TYPE:
        return f"events of thread {message.get('thread')}"
    return f"{message.get('type')} to group {group}"


async def _send_to(layer: ChannelLayer, group: str, message: dict[str, Any]) -> None:
    try:
        async with asyncio.timeout(_publish_timeout()):  # not wait_for: Python 3.11's can swallow a cancel
            await layer.group_send(group, message)
    except Exception:
        logger.exception("robotlab: could not publish %s", _what(message, group))


async def group_send(layer: ChannelLayer, group: str, message: dict[str, Any]) -> None:
    """Send ``message`` to ``group`` now (on the consumers' loop for the in-memory layer).

    It waits at most about ``STREAM_PUBLISH_TIMEOUT`` seconds; a failure is logged, not raised.
    """
    home = _home(layer)
    if home is None:
        await _send_to(layer, group, message)
        return
    future = asyncio.run_coroutine_threadsafe(_send_to(layer, group, message), home)
    try:
        async with asyncio.timeout(_publish_timeout() + 1.0):
            await asyncio.wrap_future(future)
    except Exception:  # the consumers' loop itself is stuck
        future.cancel()
        logger.exception("robotlab: could not publish %s", _what(message, group))


async def publish(layer: ChannelLayer, message: dict[str, Any]) -> None:
    """Send ``message`` to its thread's group now, waiting at most about ``STREAM_PUBLISH_TIMEOUT`` seconds."""
    await group_send(layer, thread_group(message["thread"]), message)


_sweeps: set[asyncio.Task[None]] = set()


def _start_sweep(layer: ChannelLayer, message: dict[str, Any]) -> None:
    task = asyncio.ensure_future(_send(layer, message))
    _sweeps.add(task)
    task.add_done_callback(_sweeps.discard)


def sweep_later(layer: ChannelLayer, message: dict[str, Any]) -> None:
    """Send ``message`` (a run's last ``prev``, no events) ``SWEEP_DELAY`` seconds from now, without waiting.

    An in-memory layer is swept only where a consumer may listen: on the consumers' loop, or on an async
    caller's own loop; not on RobotLab's loop, which only serves sync callers.
    """
    loop = _home(layer) or asyncio.get_running_loop()
    if loop is get_loop() and _is_memory(layer):
        return
    try:
        loop.call_soon_threadsafe(loop.call_later, SWEEP_DELAY, _start_sweep, layer, message)
    except RuntimeError:  # the loop closed since (the consumers' loop of a finished test, say): no sweep
        logger.debug("robotlab: no sweep for thread %s: its loop is closed", message["thread"])
