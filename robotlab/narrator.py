"""Narrator: a hook that narrates what robots are doing, one short line at a time.

::

    robotlab.Narrator.enable()                  # every robot, to stderr
    robot.on(robotlab.Narrator)                 # or just one robot (or network)

prints lines such as ``  · helper: thinking…``, ``  · → get_weather location="Paris"`` and, when a
tool fails, ``  ·   ✗ <first line of the error>``. Narration never breaks a run: any error while
writing a line is ignored.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import ClassVar, TextIO

from . import _ruby
from .hooks import Hook, HookContext, get_hooks, on

__all__ = ["Narrator"]


class Narrator(Hook):
    """Narrates model turns and tool calls to :attr:`output` (``sys.stderr`` when ``None``)."""

    namespace = "narrator"

    #: Characters of a narrated value before it is clipped with an ellipsis.
    MAX: ClassVar[int] = 80
    #: Where lines go; ``None`` means ``sys.stderr`` (looked up for every line).
    output: ClassVar[TextIO | None] = None

    @classmethod
    def enable(cls, *, output: TextIO | None = None) -> type[Narrator]:
        """Set :attr:`output` and register the narrator globally (once); returns the class."""
        cls.output = output
        if not any(r.handler_class is cls for r in get_hooks().registrations):
            on(cls)
        return cls

    @classmethod
    def before_llm_generation(cls, ctx: HookContext) -> None:
        """Say ``<robot>: thinking…``."""
        try:
            robot = getattr(ctx, "robot", None)
            who = getattr(robot, "name", None) if robot is not None else None
            cls._say("thinking…" if who is None else f"{who}: thinking…")
        except Exception:
            return None

    @classmethod
    def before_tool_call(cls, ctx: HookContext) -> None:
        """Say ``→ <tool> <first argument>="<value>"``."""
        try:
            cls._say(f"→ {getattr(ctx, 'tool_name', '')}{cls._summarize(getattr(ctx, 'tool_args', None))}")
        except Exception:
            return None

    @classmethod
    def after_tool_call(cls, ctx: HookContext) -> None:
        """``  ✗ <error>``, only when the tool raised."""
        try:
            error = getattr(ctx, "tool_error", None)
            if error is not None:
                cls._say(f"  ✗ {cls._clip(error)}")
        except Exception:
            return None

    @classmethod
    def _say(cls, message: str) -> None:
        try:
            print(f"  · {message}", file=sys.stderr if cls.output is None else cls.output, flush=True)
        except Exception:
            return None

    @classmethod
    def _summarize(cls, args: object) -> str:
        """`` key="value"`` for the first argument (the value clipped and quoted), else ``""``."""
        if not isinstance(args, Mapping) or not args:
            return ""
        key, value = next(iter(args.items()))
        return f" {key}={_ruby.inspect_string(cls._clip(value))}"

    @classmethod
    def _clip(cls, value: object) -> str:
        """The first line of ``value``'s text, stripped, cut to :attr:`MAX` characters plus ``…``."""
        if value is None:
            text = ""
        elif isinstance(value, str | BaseException):
            text = str(value)
        else:
            text = json.dumps(value, ensure_ascii=False, default=str)
        line = _ruby.strip(text.split("\n", 1)[0])
        return f"{line[: cls.MAX]}…" if len(line) > cls.MAX else line
