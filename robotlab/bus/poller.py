"""Serialising deliveries per robot: :class:`BusPoller`, one delivery at a time, the rest queued in order."""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import ClassVar, Protocol, Self

from ..errors import BusError
from .messages import Delivery

__all__ = ["BusPoller", "DeliveryTarget"]

logger = logging.getLogger("robotlab")


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

    def stop(self, *args: object, **kwargs: object) -> Self:
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

    def is_busy(self, robot: object) -> bool:
        """Whether ``robot`` is processing a delivery."""
        with self._lock:
            return id(robot) in self._busy

    def queue_size(self, robot: object) -> int:
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
