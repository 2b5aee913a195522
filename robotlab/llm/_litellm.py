"""The one place litellm is imported: once, on first use, quietly and without fetching its price map.

Importing litellm takes seconds, so nothing imports it at ``import robotlab``. Before it is
imported, ``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` so the import never waits on the
network for a price map (set it to ``False`` yourself to fetch a fresh one).

After the import, the objects alive then (litellm's price map and provider tables: about 380,000 tracked
objects) are moved out of the garbage collector's reach with :func:`gc.freeze`, after one
:func:`gc.collect` so no garbage is frozen. Without that, each full collection walks them all: about 250 ms
a time on the project's 2-core machine, three times per 10,000 streamed tokens, 65-77 us of CPU per token
through litellm, and a 250 ms pause in whatever the process was streaming (``benchmarks/streaming_cost.py``:
forced litellm went from a median of 534 to 456 us a token in four alternating pairs, and from 1.13 to 1.05 of
litellm alone over the benchmark's rounds). The frozen objects
are still freed when nothing refers to them; only a reference cycle among objects alive at that moment would
never be collected. The ``gc_freeze`` setting (``ROBOT_LAB_GC_FREEZE=false``) turns it off.
"""

from __future__ import annotations

import gc
import os
import threading
from typing import Any

__all__ = ["litellm_places", "load_litellm"]

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
                from ..config import get_config

                if get_config().gc_freeze:
                    gc.collect()
                    gc.freeze()
                _litellm = litellm
    return _litellm


def litellm_places(model: str, api_base: str | None = None) -> bool:
    """Whether litellm knows which provider serves ``model`` (by its ``provider/`` prefix or its own model lists).

    ``False`` for a server's own id such as ``Qwen/Qwen2.5-7B-Instruct`` (what vLLM and LM Studio list), which
    litellm refuses with "LLM Provider NOT provided"; at a configured ``api_base`` such an id is an
    OpenAI-compatible server's model, sent as written. Imports litellm.
    """
    try:
        load_litellm().get_llm_provider(model=model, api_base=api_base)
    except Exception:  # litellm's BadRequestError: no provider for this name
        return False
    return True
