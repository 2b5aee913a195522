"""A robot's mailbox: its place on a :class:`~robotlab.bus.MessageBus` (send, receive, reply, serve).

Every robot has one (``robot.mailbox``); the robot's own ``send_message``, ``on_message``,
``respond_to_tasks``, ``serve``, ``with_bus`` and ``assign_bus_poller`` hand over to it. A mailbox
on a bus listens on the channel named after its robot, and every delivery goes through its
:class:`~robotlab.bus.BusPoller` (a private one unless a network assigns a shared one), so a robot
handles one message at a time::

    robot.mailbox.poller            # the poller serialising the robot's deliveries
    robot.mailbox.leave()           # stop listening and forget the bus
"""

from __future__ import annotations

import functools
import inspect
import threading
from typing import Any, Protocol

from ..bus import BusPoller, Delivery, Handler, MessageBus, RobotMessage, call_handler
from ..errors import BusError, ConfigurationError

__all__ = ["Mailbox", "MailboxOwner"]


class MailboxOwner(Protocol):
    """The robot a mailbox belongs to: its name is the channel, ``arun`` answers what ``serve`` gets."""

    name: str

    async def arun(self, message: object = None) -> Any:
        """Run on ``message``."""

    async def _process_delivery(self, delivery: Delivery) -> None:
        """Handle one delivery (the poller calls it; the robot passes it to :meth:`Mailbox.process`)."""


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


class Mailbox:
    """One robot's bus connection, outbox and message handler.

    Args:
        owner: The robot; its ``name`` is the channel it listens on and the sender of what it sends.
        bus: A bus to join at once (``None``: none until :meth:`join`).
    """

    def __init__(self, owner: MailboxOwner, bus: MessageBus | None = None) -> None:
        self._owner = owner
        self._lock = threading.Lock()
        self._counter = 0
        self._outbox: dict[str, dict[str, Any]] = {}
        self._handler: Handler | None = None
        self._handler_takes_delivery = False
        self._poller: BusPoller | None = None
        self._group = "default"
        self._channel: str | None = None
        self._subscriber_id: int | None = None
        self.bus: MessageBus | None = None
        if bus is not None:
            if not isinstance(bus, MessageBus):
                raise ConfigurationError(f"Robot '{owner.name}': bus= takes a robotlab.bus.MessageBus, got {bus!r}")
            self.join(bus)

    # -- state ---------------------------------------------------------------------------
    @property
    def outbox(self) -> dict[str, dict[str, Any]]:
        """Sent messages by key: ``{"message": ..., "status": "sent" | "replied", "replies": [...]}``."""
        with self._lock:
            return dict(self._outbox)

    @property
    def poller(self) -> BusPoller | None:
        """The poller serialising this robot's deliveries (``None`` before it first joins a bus)."""
        return self._poller

    @property
    def poller_group(self) -> str:
        """The poller group label this robot belongs to."""
        return self._group

    # -- sending -------------------------------------------------------------------------
    def _require_bus(self) -> MessageBus:
        if self.bus is None:
            raise BusError(f"No bus configured on robot '{self._owner.name}'", robot_name=self._owner.name)
        return self.bus

    def _new_message(self, content: str | dict[str, Any], in_reply_to: str | None) -> RobotMessage:
        with self._lock:
            self._counter += 1
            message = RobotMessage.build(
                id=self._counter, sender=self._owner.name, content=content, in_reply_to=in_reply_to
            )
            if in_reply_to is None:
                self._outbox[message.key] = {"message": message, "status": "sent", "replies": []}
            return message

    def _forget(self, message: RobotMessage) -> None:
        with self._lock:
            self._outbox.pop(message.key, None)

    def send(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
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

    async def asend(self, *, to: str, content: str | dict[str, Any]) -> RobotMessage:
        """:meth:`send` for coroutines: waits for the recipients' handlers, not blocking the loop."""
        bus = self._require_bus()
        message = self._new_message(content, None)
        try:
            await bus.apublish(str(to), message)
        except BaseException:
            self._forget(message)
            raise
        return message

    def reply(self, *, to: str, content: str | dict[str, Any], in_reply_to: str) -> RobotMessage:
        """Answer the message whose key is ``in_reply_to`` (replies are not kept in the outbox).

        Raises:
            BusError: ``"No bus configured on robot '<name>'"``, or ``"Unknown channel: <to>"``.
        """
        bus = self._require_bus()
        reply = self._new_message(content, in_reply_to)
        bus.publish(str(to), reply)
        return reply

    async def areply(self, *, to: str, content: str | dict[str, Any], in_reply_to: str) -> RobotMessage:
        """:meth:`reply` for coroutines."""
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
        self._handler = handler
        return handler

    def respond_to_tasks(self, handler: Handler | None = None, *, auto_reply: bool = True) -> Any:
        """Answer each incoming task (not replies) with ``handler(message)``'s return value.

        A ``None`` return sends no reply, nor does ``auto_reply=False``. Ignoring replies means two
        responding robots never ping-pong. Usable as a decorator, with or without arguments; returns the handler.
        """
        if handler is None:
            return functools.partial(self.respond_to_tasks, auto_reply=auto_reply)
        responder = handler

        async def respond(message: RobotMessage) -> None:
            if message.is_reply:
                return
            reply = await call_handler(responder, message)
            if auto_reply and reply is not None:
                await self.areply(to=message.sender, content=reply, in_reply_to=message.key)

        self.on_message(respond)
        return handler

    def serve(self, *, auto_reply: bool = True) -> None:
        """Answer each incoming task with the robot's ``arun(content).reply`` (dict content as ``key: value`` lines)."""
        owner = self._owner

        async def answer(message: RobotMessage) -> Any:
            return (await owner.arun(_task_text(message))).reply

        self.respond_to_tasks(answer, auto_reply=auto_reply)

    async def _receive(self, delivery: Delivery) -> None:
        poller = self._poller
        assert poller is not None, "a subscribed mailbox always has a poller"
        await poller.enqueue(robot=self._owner, delivery=delivery, group=self._group)

    async def process(self, delivery: Delivery) -> None:
        """Handle one delivery (the :class:`~robotlab.bus.BusPoller` calls it through the robot).

        Raises:
            BusError: the handler raised (``"Error handling bus message on robot '<name>': <msg>"``).
        """
        message = delivery.message
        if isinstance(message, RobotMessage) and message.is_reply:
            self._correlate_reply(message)
        handler = self._handler
        try:
            if handler is None:
                delivery.ack()
            elif self._handler_takes_delivery:
                await call_handler(handler, delivery, message)
            else:
                delivery.ack()
                await call_handler(handler, message)
        except Exception as exc:
            delivery._nack_if_pending()
            raise BusError(f"Error handling bus message on robot '{self._owner.name}': {exc}",
                           robot_name=self._owner.name, channel=delivery.channel) from exc

    def _correlate_reply(self, reply: RobotMessage) -> None:
        with self._lock:
            entry = self._outbox.get(reply.in_reply_to or "")
            if entry is not None:
                entry["status"] = "replied"
                entry["replies"].append(reply)

    # -- joining -------------------------------------------------------------------------
    def join(self, bus: MessageBus | None = None) -> MessageBus:
        """Join ``bus`` (leaving the current one), or, without one, rejoin the current bus or a new one.

        A no-op when ``bus`` is the bus the mailbox is on. Returns the bus joined.
        """
        if bus is not None and bus is self.bus:
            return bus
        target = bus if bus is not None else self.bus if self.bus is not None else MessageBus()
        self.leave()
        if self._poller is None:
            self._poller = BusPoller().start()
        channel = self._owner.name
        target.add_channel(channel, type=RobotMessage)
        self._subscriber_id = target.subscribe(channel, self._receive)
        self._channel = channel
        self.bus = target
        return target

    def leave(self) -> Mailbox:
        """Stop listening on the bus and forget it (call it when tearing a robot down); returns the mailbox."""
        if self.bus is not None and self._channel is not None and self._subscriber_id is not None:
            self.bus.unsubscribe(self._channel, self._subscriber_id)
        self._channel = self._subscriber_id = None
        self.bus = None
        return self

    def assign_poller(self, poller: BusPoller, *, group: str = "default") -> None:
        """Route this robot's deliveries through ``poller`` (a network's shared one) under ``group``."""
        poller.add_group(group)
        self._poller = poller
        self._group = str(group)
