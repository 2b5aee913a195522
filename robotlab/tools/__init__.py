"""Tools a robot can call, and the catalogues and rules around them.

* :mod:`robotlab.tools.base`: :class:`Tool`, its validation, its error text and ``Tool.create``.
* :mod:`robotlab.tools.function`: :func:`tool` and :class:`FunctionTool`, tools from typed functions.
* :mod:`robotlab.tools.schema`: JSON schemas from signatures, type hints and docstrings.
* :mod:`robotlab.tools.ask`: :class:`AskUser`, the tool that asks the person, and its channels.
* :mod:`robotlab.tools.script`: :class:`~robotlab.tools.script.ScriptTool`, an executable script as a tool.
* :mod:`robotlab.tools.manifest`: :class:`~robotlab.tools.manifest.ToolManifest` and the tool registry.
* :mod:`robotlab.tools.resolution`: the ``"none"`` / ``"inherit"`` / list rules of ``tools`` and ``mcp``
  (documented as :mod:`robotlab.tool_config`).
"""

from __future__ import annotations

from .ask_user import AskUser
from .base import Tool
from .function import FunctionTool, tool

__all__ = ["AskUser", "FunctionTool", "Tool", "tool"]
