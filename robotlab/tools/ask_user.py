"""The ``AskUser`` tool: the model asks the person a question through the robot's ask channel.

It lives apart from :mod:`robotlab.tools.ask` (the channels and requests), which the tool base's approvals use,
so that no import cycle runs through :mod:`robotlab.tools.base`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .ask import AskChannel, TerminalChannel, ask_via
from .base import Tool

__all__ = ["AskUser"]


class AskUser(Tool):
    """Lets the model ask the person a question (RobotLab's ``AskUser``, LLM name ``robot_lab--ask_user``).

    The question goes through the robot's ``ask_channel`` (:mod:`robotlab.tools.ask`): by default the
    terminal, writing to ``robot.output`` and reading from ``robot.input`` (stdout and stdin when
    unset); a :class:`QueueChannel` lets a web page answer instead.
    """

    name = "robot_lab--ask_user"
    description = "Ask the user a question and wait for their answer. Offer choices when there are a few."
    parameters: ClassVar[dict[str, Any]] = {  # type: ignore[misc]
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "The question to ask"},
            "choices": {"type": "array", "items": {"type": "string"}, "description": "Optional answers to pick from"},
            "default": {"type": "string", "description": "Answer used when the user just presses Enter"},
        },
        "required": ["question"],
    }

    @property
    def channel(self) -> AskChannel:
        """Where the question goes: ``robot.ask_channel`` when it is set, else a :class:`TerminalChannel`."""
        channel = getattr(self.robot, "ask_channel", None)
        return TerminalChannel() if channel is None else channel

    async def execute(self, question: str, choices: list[str] | None = None, default: str | None = None) -> str:
        """Ask through :attr:`channel`; an empty answer gives ``default``, a number the matching choice."""
        return await ask_via(self.channel, question, choices, default, self.robot)
