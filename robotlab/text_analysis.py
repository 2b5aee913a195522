"""The documented path of :mod:`robotlab.text.analysis`: ``robotlab.text_analysis`` is that module.

``import robotlab.text_analysis`` (or ``from robotlab import text_analysis``) gives the module object
of :mod:`robotlab.text.analysis` itself, so reading, calling and patching its names behave as there.
"""

from __future__ import annotations

import sys

from .text import analysis
from .text.analysis import *  # noqa: F403  (the same names, for type checkers and IDEs)
from .text.analysis import __all__ as __all__

sys.modules[__name__] = analysis
