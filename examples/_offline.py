"""What every example uses to pick its model: a real one when configured, else an offline one.

A real model is configured when ``ROBOT_LAB_MODEL`` (or a config file) names one, or a provider key such
as ``OPENAI_API_KEY`` is set; robots then get ``llm=None``, which means litellm with that model. Without
one, each robot gets a :class:`robotlab.testing.FakeLLM` scripted with the replies the example passes, so
every example runs offline, in a second, with the same code path through the robot, its tools and its
hooks. Only the words of the replies are canned.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from robotlab.config import get_config
from robotlab.testing import FakeLLM, Step, text

__all__ = ["OFFLINE", "llm", "output_dir"]

#: ``True`` when no model is configured and the examples answer from their scripts.
OFFLINE = get_config().default_model() is None


def llm(*replies: Step | str) -> FakeLLM | None:
    """The ``llm=`` for a robot: ``None`` with a real model, else a FakeLLM answering ``replies`` in order.

    Strings are text replies; :func:`robotlab.testing.tool_call` steps make the robot call a tool. When
    the script runs out, the last text reply is repeated.
    """
    if not OFFLINE:
        return None
    steps = [text(r) if isinstance(r, str) else r for r in replies]
    last_text = next((s for s in reversed(steps) if s.content and not s.calls), text("OK."))
    return FakeLLM(steps, default=last_text)


def output_dir(argv: list[str], name: str) -> Path:
    """The directory named by the first command-line argument, else a new temporary one."""
    folder = Path(argv[1]) if len(argv) > 1 else Path(tempfile.mkdtemp(prefix=f"robotlab_{name}_"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder
