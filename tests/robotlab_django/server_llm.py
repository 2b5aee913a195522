"""An LLM factory for worker processes: the default transport to the fake server at ``ROBOTLAB_TEST_FAKE_API_BASE``.

A test starts a :class:`robotlab.testing.FakeLLMServer`, sets ``ROBOTLAB_TEST_LLM`` to
``tests.robotlab_django.server_llm.fake_server_llm`` and the server's URL in the worker's environment, and reads the
requests its worker sent.
"""

from __future__ import annotations

import os

from robotlab.llm import AutoLLM


def fake_server_llm() -> AutoLLM:
    """The default transport (litellm or direct, per model) to the fake server, with a fake key."""
    return AutoLLM(api_base=os.environ["ROBOTLAB_TEST_FAKE_API_BASE"], api_key="sk-fake")
