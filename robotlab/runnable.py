"""Runnable: what robots and networks have in common."""

from __future__ import annotations

from typing import Any

__all__ = ["Runnable"]


class Runnable:
    """The shared interface of :class:`~robotlab.Robot` and :class:`~robotlab.Network`.

    Implementers provide ``run`` and ``crew``; the rest derive from them.
    """

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
