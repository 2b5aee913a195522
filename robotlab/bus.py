"""The robot message bus: RobotMessage, MessageBus, BusPoller and the BusMessaging robot mixin.

Robots on one :class:`MessageBus` talk by name. Each robot listens on the channel named after it
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
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

from ._runtime import run_sync
from .errors import BusError, ConfigurationError

if TYPE_CHECKING:
    from .robot import Robot

__all__ = ["BusMessaging", "BusPoller", "Delivery", "MessageBus", "RobotMessage"]

logger = logging.getLogger("robotlab")

Handler = Callable[..., Any]

#: Plain-function handlers run here, so a handler may block (on ``robot.run`` or a synchronous
#: ``send_message``) without holding the event loop or the loop's default executor.
_HANDLER_THREADS = ThreadPoolExecutor(max_workers=64, thread_name_prefix="robotlab-bus")


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)


async def _call(handler: Handler, *args: Any) -> Any:
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
            await _call(handler, delivery)
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

    async def enqueue(self, *, robot: Any, delivery: Delivery, group: str = "default") -> None:
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

    async def _process_and_drain(self, robot: Any, delivery: Delivery) -> None:
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
    async def _process(robot: Any, delivery: Delivery) -> None:
        try:
            await robot._process_delivery(delivery)
        except BusError as exc:
            logger.warning("BusPoller: delivery error: %s", exc)
        except Exception as exc:
            logger.warning("BusPoller: unexpected error: %s", exc)

    def __repr__(self) -> str:
        return f"<BusPoller groups={self.groups}>"


def _takes_delivery(handler: Handler) -> bool:
    """Whether ``handler`` takes ``(delivery, message)`` rather than ``(message)``."""
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return True
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not positional:
        raise TypeError(f"on_message handler must take (message) or (delivery, message), got {handler!r}")
    return len([p for p in positional if p.default is p.empty]) >= 2  # defaults (tag=tag) do not count


def _task_text(message: RobotMessage) -> str:
    content = message.content
    if isinstance(content, dict):
        return "\n".join(f"{key}: {value}" for key, value in content.items())
    return str(content)


class BusMessaging:
    """The message-bus half of :class:`~robotlab.Robot`: send, receive, reply, serve and spawn.

    A robot built with ``bus=`` (or joined with :meth:`with_bus`) listens on the channel named
    after it. Every delivery goes through its :class:`BusPoller` (a private one unless a network
    assigns a shared one), so a robot handles one message at a time.
    """

    name: str
    bus: MessageBus | None

    def _init_bus_messaging(self) -> None:
        """Set up the bus state and join ``self.bus`` when one was given (the end of ``Robot.__init__``)."""
        self._bus_lock = threading.Lock()
        self._message_counter = 0
        self._outbox: dict[str, dict[str, Any]] = {}
        self._message_handler: Handler | None = None
        self._handler_takes_delivery = False
        self._bus_poller: BusPoller | None = None
        self._bus_poller_group = "default"
        self._bus_channel: str | None = None
        self._bus_subscriber_id: int | None = None
        bus, self.bus = self.bus, None
        if bus is not None:
            if not isinstance(bus, MessageBus):
                raise ConfigurationError(
                    f"Robot '{self.name}': bus= takes a robotlab.bus.MessageBus, got {bus!r}"
                )
            self.with_bus(bus)

    # -- state ---------------------------------------------------------------------------
    @property
    def outbox(self) -> dict[str, dict[str, Any]]:
        """Sent messages by key: ``{"message": ..., "status": "sent" | "replied", "replies": [...]}``."""
        with self._bus_lock:
            return dict(self._outbox)

    @property
    def bus_poller(self) -> BusPoller | None:
        """The poller serialising this robot's deliveries (``None`` before it first joins a bus)."""
        return self._bus_poller

    @property
    def bus_poller_group(self) -> str:
        """The poller group label this robot belongs to."""
        return self._bus_poller_group

    # -- sending -------------------------------------------------------------------------
    def _require_bus(self) -> MessageBus:
        if self.bus is None:
            raise BusError(f"No bus configured on robot '{self.name}'")
        return self.bus

    def _new_message(self, content: str | dict[str, Any], in_reply_to: str | None) -> RobotMessage:
        with self._bus_lock:
            self._message_counter += 1
            message = RobotMessage.build(
                id=self._message_counter, sender=self.name, content=content, in_reply_to=in_reply_to
            )
            if in_reply_to is None:
                self._outbox[message.key] = {"message": message, "status": "sent", "replies": []}
            return message

    def _forget(self, message: RobotMessage) -> None:
        with self._bus_lock:
            self._outbox.pop(message.key, None)

    def send_message(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
        """Send ``content`` to the robot(s) named ``to`` and record it in :attr:`outbox` as ``"sent"``.

        Waits for the recipients' handlers when called outside an event loop (see :meth:`MessageBus.publish`).

        Raises:
            BusError: ``"No bus configured on robot '<name>'"``, or ``"Unknown channel: <to>"``.
        """
        bus = self._require_bus()
        message = self._new_message(content, None)
        try:
            bus.publish(str(to), message)
        except BaseException:
            self._forget(message)
            raise
        return message

    async def asend_message(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
        """:meth:`send_message` for coroutines: waits for the recipients' handlers, not blocking the loop."""
        bus = self._require_bus()
        message = self._new_message(content, None)
        try:
            await bus.apublish(str(to), message)
        except BaseException:
            self._forget(message)
            raise
        return message

    def send_reply(self, *, to: str, content: str | dict[str, Any], in_reply_to: str) -> RobotMessage:
        """Answer the message whose key is ``in_reply_to`` (replies are not kept in the outbox).

        Raises:
            BusError: ``"No bus configured on robot '<name>'"``, or ``"Unknown channel: <to>"``.
        """
        bus = self._require_bus()
        reply = self._new_message(content, in_reply_to)
        bus.publish(str(to), reply)
        return reply

    async def asend_reply(self, *, to: str, content: str | dict[str, Any], in_reply_to: str) -> RobotMessage:
        """:meth:`send_reply` for coroutines."""
        bus = self._require_bus()
        reply = self._new_message(content, in_reply_to)
        await bus.apublish(str(to), reply)
        return reply

    # -- receiving -----------------------------------------------------------------------
    def on_message(self, handler: Handler) -> Handler:
        """Handle incoming messages with ``handler`` (replacing any previous one); usable as a decorator.

        ``handler(message)`` gets the delivery acked before it is called; ``handler(delivery, message)``
        (two arguments without defaults, or ``*args``) acks or nacks it itself. It may be a coroutine
        function. When it raises, the delivery is nacked if still pending and the poller logs
        ``"BusPoller: delivery error: Error handling bus message on robot '<name>': <msg>"``.
        """
        self._handler_takes_delivery = _takes_delivery(handler)
        self._message_handler = handler
        return handler

    def respond_to_tasks(self, handler: Handler | None = None, *, auto_reply: bool = True) -> Any:
        """Answer each incoming task (not replies) with ``handler(message)``'s return value.

        A ``None`` return sends no reply, nor does ``auto_reply=False``. Ignoring replies means two
        responding robots never ping-pong. Usable as ``@robot.respond_to_tasks`` or
        ``@robot.respond_to_tasks(auto_reply=False)``; returns the handler.
        """
        if handler is None:
            return functools.partial(self.respond_to_tasks, auto_reply=auto_reply)
        responder = handler

        async def respond(message: RobotMessage) -> None:
            if message.is_reply:
                return
            reply = await _call(responder, message)
            if auto_reply and reply is not None:
                await self.asend_reply(to=message.sender, content=reply, in_reply_to=message.key)

        self.on_message(respond)
        return handler

    def serve(self, *, auto_reply: bool = True) -> Self:
        """Answer each incoming task with this robot's ``arun(content).reply``.

        Dict content is sent to the model as ``"key: value"`` lines.
        """
        robot = cast("Robot", self)

        async def answer(message: RobotMessage) -> Any:
            return (await robot.arun(_task_text(message))).reply

        self.respond_to_tasks(answer, auto_reply=auto_reply)
        return self

    async def _receive(self, delivery: Delivery) -> None:
        poller = self._bus_poller
        assert poller is not None, "a subscribed robot always has a poller"
        await poller.enqueue(robot=self, delivery=delivery, group=self._bus_poller_group)

    async def _process_delivery(self, delivery: Delivery) -> None:
        """Handle one delivery (called by the :class:`BusPoller`)."""
        message = delivery.message
        if isinstance(message, RobotMessage) and message.is_reply:
            self._correlate_reply(message)
        handler = self._message_handler
        try:
            if handler is None:
                delivery.ack()
            elif self._handler_takes_delivery:
                await _call(handler, delivery, message)
            else:
                delivery.ack()
                await _call(handler, message)
        except Exception as exc:
            delivery._nack_if_pending()
            raise BusError(f"Error handling bus message on robot '{self.name}': {exc}") from exc

    def _correlate_reply(self, reply: RobotMessage) -> None:
        with self._bus_lock:
            entry = self._outbox.get(reply.in_reply_to or "")
            if entry is not None:
                entry["status"] = "replied"
                entry["replies"].append(reply)

    # -- joining -------------------------------------------------------------------------
    def with_bus(self, bus: MessageBus | None = None) -> Self:
        """Join ``bus`` (leaving the current one), or, without one, rejoin the current bus or a new one.

        A no-op when ``bus`` is the bus the robot is on.
        """
        if bus is not None and bus is self.bus:
            return self
        target = bus if bus is not None else self.bus if self.bus is not None else MessageBus()
        self.leave_bus()
        if self._bus_poller is None:
            self._bus_poller = BusPoller().start()
        channel = self.name
        target.add_channel(channel, type=RobotMessage)
        self._bus_subscriber_id = target.subscribe(channel, self._receive)
        self._bus_channel = channel
        self.bus = target
        return self

    def leave_bus(self) -> Self:
        """Stop listening on the bus and forget it (call it when tearing a robot down)."""
        if self.bus is not None and self._bus_channel is not None and self._bus_subscriber_id is not None:
            self.bus.unsubscribe(self._bus_channel, self._bus_subscriber_id)
        self._bus_channel = self._bus_subscriber_id = None
        self.bus = None
        return self

    def assign_bus_poller(self, poller: BusPoller, *, group: str = "default") -> None:
        """Route this robot's deliveries through ``poller`` (a network's shared one) under ``group``."""
        poller.add_group(group)
        self._bus_poller = poller
        self._bus_poller_group = str(group)

    def spawn(
        self,
        *,
        name: str = "robot",
        system_prompt: str | None = None,
        template: str | None = None,
        local_tools: Any = (),
        **options: Any,
    ) -> Robot:
        """Build a robot on this robot's bus (creating one and joining it first when there is none).

        The new robot uses this robot's ``model``, ``provider`` and ``llm`` unless ``options`` say otherwise.
        """
        from .robot import build

        parent = cast("Robot", self)
        if self.bus is None:
            self.with_bus()
        inherited: dict[str, Any] = {"bus": self.bus}
        for option, value in (("model", parent.model), ("provider", parent.provider), ("llm", parent._llm)):
            if value is not None:
                inherited[option] = value
        return build(
            name=name,
            system_prompt=system_prompt,
            template=template,
            local_tools=local_tools,
            **{**inherited, **options},
        )
