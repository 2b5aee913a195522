"""The documented path of :mod:`robotlab.tools.resolution`: ``robotlab.tool_config`` is that module.

``import robotlab.tool_config`` (or ``from robotlab import tool_config``) gives the module object of
:mod:`robotlab.tools.resolution` itself, so reading, calling and patching its names behave as there.
"""

from __future__ import annotations

import sys

from .tools import resolution
from .tools.resolution import *  # noqa: F403  (the same names, for type checkers and IDEs)
from .tools.resolution import __all__ as __all__

sys.modules[__name__] = resolution
