"""The robot: :class:`Robot`, :func:`build`, and the parts a robot is made of.

``from robotlab.robot import Robot, build`` (also ``robotlab.Robot`` and ``robotlab.build``). The package
holds one concept a module:

* :mod:`~robotlab.robot.core`: the :class:`Robot` class and :func:`build`;
* :mod:`~robotlab.robot.options`: :class:`RobotOptions`, the options a robot is built with, and
  :class:`RobotKwargs`, the same options as typed keywords;
* :mod:`~robotlab.robot.parts`, :mod:`~robotlab.robot.chaining` and :mod:`~robotlab.robot.connections`:
  the attributes read from the parts, the ``with_*`` methods, and the message-bus and MCP methods, bases of
  :class:`Robot`;
* the parts a robot has: :mod:`~robotlab.robot.conversation` (its history and instructions),
  :mod:`~robotlab.robot.persona` (template, skills, system prompt), :mod:`~robotlab.robot.learnings`,
  :mod:`~robotlab.robot.mailbox` (its place on a message bus);
* a run: :mod:`~robotlab.robot.plan` resolves it once (model, tools, MCP servers, callbacks, limits),
  :mod:`~robotlab.robot.run` wraps the hooks, the budgets and the events around
  :mod:`~robotlab.robot.loop` (LLM, tools, LLM), which is handed a :mod:`~robotlab.robot.request`;
  :mod:`~robotlab.robot.compaction` compacts the history before a model call, and
  :mod:`~robotlab.robot.delegating` runs a robot on another's behalf;
* :mod:`~robotlab.robot.rehearsal`: a turn of a robot of its own, answered in memory, that a worker runs at start.
"""

from __future__ import annotations

from .core import Robot, build
from .options import RobotKwargs, RobotOptions
from .plan import DEFAULT_MAX_TOOLS

__all__ = ["DEFAULT_MAX_TOOLS", "Robot", "RobotKwargs", "RobotOptions", "build"]
