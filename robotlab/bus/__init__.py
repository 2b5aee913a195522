"""The robot message bus: RobotMessage, Delivery, MessageBus and BusPoller.

Robots on one :class:`MessageBus` talk by name, through their :class:`~robotlab.robot.mailbox.Mailbox`
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

from .channels import Handler, MessageBus, call_handler
from .messages import Delivery, RobotMessage
from .poller import BusPoller, DeliveryTarget

__all__ = ["BusPoller", "Delivery", "DeliveryTarget", "Handler", "MessageBus", "RobotMessage", "call_handler"]
