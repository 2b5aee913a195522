"""The robot message bus: RobotMessage, Delivery, MessageBus and BusPoller.

Robots on one :class:`MessageBus` talk by name, through their :class:`~robotlab.mailbox.Mailbox`
(``robot.mailbox``). Each robot listens on the channel named after it
(robots that share a name all receive: fan-out), and every delivery to a robot goes through a
:class:`BusPoller`, which runs one delivery per robot at a time::

    bus = MessageBus()
    bob = robotlab.build(name="bob", bus=bus, llm=llm).serve()   # answers every task with run().reply
    alice = robotlab.build(name="alice", bus=bus)
    message = alice.send_message(to="bob", content="What is 6 * 7?")
    alice.outbox[message.key]["status"]                           # "replied"

Delivery is asynchronous inside: async handlers run on the event loop that delivers, and plain
functions run in a worker thread, so either may block on a robot run. A synchronous ``publish``
(and ``send_message``) from code without a running event loop waits until every subscriber's handler
has finished; called inside a running loop it schedules the delivery and returns at once, so
coroutines should ``await bus.apublish(...)`` (``await robot.asend_message(...)``) instead.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Self

from ._runtime import run_sync
from .errors import BusError

__all__ = ["BusPoller", "Delivery", "DeliveryTarget", "MessageBus", "RobotMessage", "call_handler"]

logger = logging.getLogger("robotlab")

Handler = Callable[..., Any]

#: Plain-function handlers run here, so a handler may block (on ``robot.run`` or a synchronous
#: ``send_message``) without holding the event loop or the loop's default executor.
_HANDLER_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="robotlab-bus")


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


async def call_handler(handler: Handler, *args: Any) -> Any:
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


@dataclass(frozen=True)
class RobotMessage:
    """An immutable message between robots (Ruby ``from`` is :attr:`sender` here).

    Attributes:
        id: The sender's own message counter (not unique across senders).
        sender: The sending robot's name, which is also the channel a reply goes to.
        content: The payload: text or a dict.
        in_reply_to: The :attr:`key` of the message this one answers, else ``None``.
    """

    id: int
    sender: str
    content: str | dict[str, Any]
    in_reply_to: str | None = None

    @classmethod
    def build(
        cls, *, id: int, sender: str, content: str | dict[str, Any], in_reply_to: str | None = None
    ) -> RobotMessage:
        """Build a message (keyword arguments only; ``in_reply_to`` defaults to ``None``)."""
        return cls(id=id, sender=sender, content=content, in_reply_to=in_reply_to)

    def to_dict(self) -> dict[str, Any]:
        """All four fields, ``in_reply_to`` included when ``None``, under RobotLab's names (``from``)."""
        return {"id": self.id, "from": self.sender, "content": self.content, "in_reply_to": self.in_reply_to}

    @property
    def key(self) -> str:
        """``"sender:id"``: the identity that replies name in :attr:`in_reply_to`."""
        return f"{self.sender}:{self.id}"

    @property
    def is_reply(self) -> bool:
        """Whether this message answers another one."""
        return self.in_reply_to is not None


class Delivery:
    """One subscriber's copy of a published message. Settle it once: :meth:`ack` or :meth:`nack`.

    :attr:`status` is ``"pending"`` until then, ``"acked"`` or ``"nacked"`` after. A delivery
    has no deadline: one that its handler never settles stays pending.
    """

    def __init__(self, message: Any, *, channel: str, subscriber_id: int) -> None:
        self.message = message
        self.channel = channel
        self.subscriber_id = subscriber_id
        self._status = "pending"
        self._lock = threading.Lock()

    @property
    def status(self) -> str:
        """``"pending"``, ``"acked"`` or ``"nacked"``."""
        return self._status

    @property
    def is_pending(self) -> bool:
        """Whether neither :meth:`ack` nor :meth:`nack` has been called."""
        return self._status == "pending"

    @property
    def is_acked(self) -> bool:
        """Whether the subscriber accepted the message."""
        return self._status == "acked"

    @property
    def is_nacked(self) -> bool:
        """Whether the subscriber rejected the message (or its handler failed)."""
        return self._status == "nacked"

    def ack(self) -> None:
        """Accept the message. Raises :class:`BusError` when already settled."""
        self._settle("acked")

    def nack(self) -> None:
        """Reject the message. Raises :class:`BusError` when already settled."""
        self._settle("nacked")

    def _settle(self, status: str, *, strict: bool = True) -> None:
        with self._lock:
            if self._status != "pending":
                if strict:
                    raise BusError(f"Delivery already resolved as {self._status}")
                return
            self._status = status

    def _nack_if_pending(self) -> None:
        self._settle("nacked", strict=False)

    def __repr__(self) -> str:
        return f"<Delivery channel={self.channel!r} subscriber={self.subscriber_id} status={self._status!r}>"


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

    def _deliveries(self, channel: str, message: Any) -> list[tuple[Handler, Delivery]]:
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

    async def apublish(self, channel: str, message: Any) -> list[Delivery]:
        """Publish and wait until every subscriber's handler has returned; returns their deliveries.

        Raises:
            BusError: ``"Unknown channel: <name>"``.
            TypeError: the message is not of the channel's type.
        """
        targets = self._deliveries(channel, message)
        await self._deliver(targets)
        return [delivery for _, delivery in targets]

    def publish(self, channel: str, message: Any) -> list[Delivery]:
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


class DeliveryTarget(Protocol):
    """What a :class:`BusPoller` delivers to: a robot (which hands the delivery to its mailbox)."""

    name: str

    async def _process_delivery(self, delivery: Delivery) -> None:
        """Handle one delivery."""


class BusPoller:
    """Serialises bus deliveries per robot: one delivery at a time, the rest queued in order.

    There is no poller thread: :meth:`enqueue` processes a delivery in the awaiting task when the
    robot is idle, then drains what queued up behind it. Robots are told apart by identity, so
    robots that share a name (fan-out) do not wait for each other. A handler error is logged and
    the drain goes on; the robot is idle again once its queue is empty.
    """

    #: The most deliveries waiting for one robot; a delivery beyond it is nacked and logged.
    QUEUE_CAPACITY: ClassVar[int] = 512

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy: set[int] = set()
        self._queues: dict[int, deque[Delivery]] = {}
        self._groups = ["default"]

    def start(self) -> Self:
        """A no-op kept for parity with RobotLab (there is no thread to start)."""
        return self

    def stop(self, *args: Any, **kwargs: Any) -> Self:
        """A no-op kept for parity with RobotLab; any arguments are ignored."""
        return self

    @property
    def is_running(self) -> bool:
        """Always ``True``: there is nothing to start."""
        return True

    def add_group(self, name: str) -> None:
        """Record a poller group label (idempotent); groups are labels only, with no queues of their own."""
        with self._lock:
            if str(name) not in self._groups:
                self._groups.append(str(name))

    @property
    def groups(self) -> list[str]:
        """The group labels, starting with ``"default"``."""
        with self._lock:
            return list(self._groups)

    def is_busy(self, robot: Any) -> bool:
        """Whether ``robot`` is processing a delivery."""
        with self._lock:
            return id(robot) in self._busy

    def queue_size(self, robot: Any) -> int:
        """How many deliveries wait for ``robot``."""
        with self._lock:
            return len(self._queues.get(id(robot), ()))

    async def enqueue(self, *, robot: DeliveryTarget, delivery: Delivery, group: str = "default") -> None:
        """Process ``delivery`` for ``robot`` now if it is idle (then drain its queue), else queue it.

        ``group`` is informational. When the robot already has :attr:`QUEUE_CAPACITY` deliveries
        waiting, this one is nacked and a warning is logged. Handler errors never propagate:
        ``BusError`` is logged as ``"BusPoller: delivery error: <msg>"``, anything else as
        ``"BusPoller: unexpected error: <msg>"``.
        """
        key = id(robot)
        with self._lock:
            if key in self._busy:
                queue = self._queues.setdefault(key, deque())
                full = len(queue) >= self.QUEUE_CAPACITY
                if not full:
                    queue.append(delivery)
            else:
                self._busy.add(key)
                full = False
                queue = None
        if full:
            delivery._nack_if_pending()
            logger.warning(
                "BusPoller: queue full for robot '%s' (%d waiting); delivery nacked",
                getattr(robot, "name", robot), self.QUEUE_CAPACITY,
            )
        elif queue is None:
            await self._process_and_drain(robot, delivery)

    async def _process_and_drain(self, robot: DeliveryTarget, delivery: Delivery) -> None:
        key = id(robot)
        current: Delivery | None = delivery
        try:
            while current is not None:
                await self._process(robot, current)
                with self._lock:
                    queue = self._queues.get(key)
                    current = queue.popleft() if queue else None
                    if current is None:
                        self._busy.discard(key)
                        self._queues.pop(key, None)
        except BaseException:  # cancelled: free the robot; what is queued runs on its next delivery
            with self._lock:
                self._busy.discard(key)
            raise

    @staticmethod
    async def _process(robot: DeliveryTarget, delivery: Delivery) -> None:
        try:
            await robot._process_delivery(delivery)
        except BusError as exc:
            logger.warning("BusPoller: delivery error: %s", exc)
        except Exception as exc:
            logger.warning("BusPoller: unexpected error: %s", exc)

    def __repr__(self) -> str:
        return f"<BusPoller groups={self.groups}>"
