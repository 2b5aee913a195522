"""Runnable: what robots and networks have in common."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .runtime import get_loop, run_sync

if TYPE_CHECKING:
    from .streaming import Event

__all__ = ["Runnable"]

ResultT = TypeVar("ResultT")


class Runnable(Generic[ResultT]):
    """The shared interface of :class:`~robotlab.Robot` and :class:`~robotlab.Network`.

    Implementers provide ``arun`` (taking ``on_event=``) and ``crew``; the rest derive from them.
    ``ResultT`` is what a run returns (a robot's :class:`~robotlab.RobotResult`).
    """

    async def arun(self, message: object = None, **options: Any) -> ResultT:
        """Run on ``message``; ``on_event=`` receives every :class:`~robotlab.streaming.Event`."""
        raise NotImplementedError

    def run(self, message: object = None, **options: Any) -> ResultT:
        """Synchronous :meth:`arun` (runs on RobotLab's background event loop)."""
        return run_sync(self.arun(message, **options))

    async def astream(self, message: object = None, **options: Any) -> AsyncIterator[Event]:
        """Run and yield each :class:`~robotlab.streaming.Event` as it happens.

        The last event is ``stream.ended``; a failed run yields ``run.failed`` and then raises. Leaving
        the loop early cancels the run.
        """
        events: asyncio.Queue[Event | None] = asyncio.Queue()
        task = asyncio.ensure_future(self.arun(message, on_event=events.put_nowait, **options))
        task.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            task.result()
        finally:
            if not task.done():
                task.cancel()

    def stream(self, message: object = None, **options: Any) -> Iterator[Event]:
        """Synchronous :meth:`astream`: a generator of events (the run goes on RobotLab's event loop)."""
        events: queue.Queue[Event | BaseException | None] = queue.Queue()

        async def produce() -> None:
            try:
                await self.arun(message, on_event=events.put, **options)
            except BaseException as exc:
                events.put(exc)
            finally:
                events.put(None)

        future = asyncio.run_coroutine_threadsafe(produce(), get_loop())
        try:
            while (item := events.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            future.cancel()

    @property
    def crew(self) -> list[Any]:
        """The robots that do the work."""
        raise NotImplementedError

    @property
    def chief(self) -> Any:
        """The first robot of the crew."""
        crew = self.crew
        return crew[0] if crew else None

    @property
    def robot_count(self) -> int:
        """How many robots are in the crew."""
        return len(self.crew)

    @property
    def is_network(self) -> bool:
        """Whether this is a network of robots."""
        return False

    @property
    def is_single(self) -> bool:
        """Whether this is a single robot."""
        return not self.is_network
