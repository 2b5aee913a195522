"""Network broadcasts: a message to every handler registered on a network, also set in its memory."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from ..memory import Memory
from ..runtime import run_sync

__all__ = ["BROADCAST_KEY", "Broadcaster", "BroadcastHandler"]

logger = logging.getLogger("robotlab.network")

#: The memory key :meth:`Network.broadcast <robotlab.network.Network.broadcast>` writes its envelope to.
BROADCAST_KEY = "_network_broadcast"

#: ``handler(envelope)``, sync or async.
BroadcastHandler = Callable[[dict[str, Any]], Any]


class Broadcaster:
    """The broadcast handlers of one network.

    Args:
        network: The network's name (put in every envelope).
    """

    def __init__(self, network: str) -> None:
        self.network = network
        self.handlers: list[BroadcastHandler] = []
        self._background: set[asyncio.Task[Any]] = set()

    def add(self, handler: BroadcastHandler) -> BroadcastHandler:
        """Register ``handler``.

        Raises:
            ValueError: ``handler`` is not callable (``"Block required for on_broadcast"``).
        """
        if not callable(handler):
            raise ValueError("Block required for on_broadcast")
        self.handlers.append(handler)
        return handler

    def send(self, payload: object, memory: Memory) -> None:
        """Send ``{"payload", "network", "timestamp"}`` to every handler, then set it in ``memory``.

        A sync handler runs at once; a coroutine handler runs as a task on the running loop (or to its end
        on RobotLab's loop when there is none). A handler that raises is logged.
        """
        envelope = {"payload": payload, "network": self.network, "timestamp": datetime.now(UTC).isoformat()}
        for handler in list(self.handlers):
            try:
                answer = handler(envelope)
                if inspect.isawaitable(answer):
                    self._spawn(answer)
            except Exception as exc:
                logger.warning("Network '%s': broadcast handler failed: %s", self.network, exc)
        memory.set(BROADCAST_KEY, envelope)

    def _spawn(self, awaitable: Awaitable[object]) -> None:
        async def guarded() -> None:
            try:
                await awaitable
            except Exception as exc:
                logger.warning("Network '%s': broadcast handler failed: %s", self.network, exc)

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            run_sync(guarded())
            return
        task = asyncio.ensure_future(guarded())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
