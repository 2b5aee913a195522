"""Test doubles for robots: FakeLLM, FunctionLLM, the offline DemoLLM, the fake OpenAI-compatible server, a guard.

* :class:`FakeLLM` - a scripted model (``text``, ``tool_call``, ``tool_calls``, ``raise_`` steps)
  that records every request.
* :class:`FunctionLLM` - a model made of a function.
* :class:`DemoLLM` - an offline stand-in model for demos and the example project: it calls a tool
  when the message plainly asks for one and streams its answer word by word (no key, no network).
* :class:`FakeLLMServer` - an OpenAI-compatible HTTP server on 127.0.0.1 so the real litellm
  path runs over real HTTP; its steps live in :mod:`robotlab.testing.server`.
* :func:`allow_real_requests` / :func:`block_real_requests` - the guard against real providers
  (the pytest plugin blocks them in every test).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .demo import DemoLLM
from .fake import FakeLLM, FakeLLMExhausted, FunctionLLM, Step, raise_, text, tool_call, tool_calls
from .guard import allow_real_requests, block_real_requests

if TYPE_CHECKING:
    from .server import FakeLLMServer

__all__ = [
    "DemoLLM",
    "FakeLLM",
    "FakeLLMExhausted",
    "FakeLLMServer",
    "FunctionLLM",
    "Step",
    "allow_real_requests",
    "block_real_requests",
    "raise_",
    "text",
    "tool_call",
    "tool_calls",
]


def __getattr__(name: str) -> Any:
    if name == "FakeLLMServer":
        from .server import FakeLLMServer

        return FakeLLMServer
    raise AttributeError(f"module 'robotlab.testing' has no attribute {name!r}")
