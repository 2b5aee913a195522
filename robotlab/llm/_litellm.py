"""The one place litellm is imported: once, on first use, quietly and without fetching its price map.

Importing litellm takes seconds, so nothing imports it at ``import robotlab``. Before it is
imported, ``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` so the import never waits on the
network for a price map (set it to ``False`` yourself to fetch a fresh one).
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["load_litellm"]

_litellm_lock = threading.Lock()
_litellm: Any = None


def load_litellm() -> Any:
    """Import litellm once, quietly and without fetching its price map."""
    global _litellm
    if _litellm is None:
        with _litellm_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                import litellm

                litellm.suppress_debug_info = True
                litellm.drop_params = True
                _litellm = litellm
    return _litellm
