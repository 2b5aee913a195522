"""What a robot has learned: :class:`Learnings`, prepended to the message of its later runs.

Every robot has them (``robot.learn``, ``robot.alearn``, ``robot.learnings``). Learning runs inside the
``learn`` hook family; the list is also kept in the robot's memory under ``"learnings"``.
"""

from __future__ import annotations

from typing import Any, Protocol

from .. import hooks
from .._ruby import strip as ruby_strip
from ..runtime import run_sync

__all__ = ["LEARNINGS_HEADER", "Learnings"]

#: The first line of the learnings prepended to a run's message.
LEARNINGS_HEADER = "LEARNINGS FROM PREVIOUS RUNS:"


class _Learner(Protocol):
    """The robot: hook contexts name it, its ``hooks`` are consulted, its ``memory`` keeps the list."""

    name: str
    hooks: hooks.HookRegistry

    @property
    def memory(self) -> Any:
        """The robot's own memory."""


class Learnings:
    """A robot's learnings, oldest first.

    Args:
        owner: The robot that learns.
    """

    def __init__(self, owner: _Learner) -> None:
        self._owner = owner
        self._items: list[str] = []

    @property
    def items(self) -> list[str]:
        """What the robot has learned, oldest first (a copy)."""
        return list(self._items)

    def learn(self, text: object) -> None:
        """Blocking :meth:`alearn`."""
        run_sync(self.alearn(text))

    async def alearn(self, text: object) -> None:
        """Remember ``text``: later runs get it prepended to their message.

        Blank text (or ``None``) is ignored (no hooks fire). Learnings that ``text`` contains are
        replaced by it; text that a learning already contains (or equals) is not stored again. Runs
        inside the ``learn`` hook family; its ``on_learn`` hook fires whether or not the text was
        stored (``ctx.stored``). The list is also kept in the robot's memory under ``"learnings"``.
        """
        text = ruby_strip("" if text is None else str(text))
        if not text:
            return
        owner = self._owner
        context = hooks.LearnHookContext(robot=owner, text=text, learnings_before=tuple(self._items))
        scope = hooks.scope_for(owner.hooks)

        async def store() -> None:
            kept = [learned for learned in self._items if learned == text or learned not in text]
            if not any(text in learned for learned in kept):
                kept.append(text)
                context.stored = True
            if kept != self._items:
                self._items = kept
                owner.memory.set("learnings", list(kept))
            await hooks.call("on_learn", context, **scope._asdict())

        await hooks.run("learn", context, store, **scope._asdict())

    def inject(self, message: str | None) -> str | None:
        """``message`` with the learnings prepended (unchanged without learnings or message)."""
        if not self._items or message is None:
            return message
        lines = "\n".join(f"- {learned}" for learned in self._items)
        return f"{LEARNINGS_HEADER}\n{lines}\n\n{message}"
