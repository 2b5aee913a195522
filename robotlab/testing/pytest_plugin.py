"""RobotLab's pytest plugin (installed with the package as the ``robotlab`` plugin).

* Blocks real LLM provider requests in every test (loopback endpoints stay allowed);
  opt out with ``@pytest.mark.allow_real_llm`` or ``robotlab.testing.allow_real_requests()``.
* ``fake_llm``: an empty :class:`~robotlab.testing.FakeLLM`; ``fake_llm.push(...)`` replies.
* ``fake_llm_server``: a running :class:`~robotlab.testing.FakeLLMServer`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .. import llm
from .fake import FakeLLM


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin's marker."""
    config.addinivalue_line("markers", "allow_real_llm: let this test call real LLM providers")


@pytest.fixture(autouse=True)
def _robotlab_block_real_requests(request: pytest.FixtureRequest) -> Iterator[None]:
    previous = llm.ALLOW_REAL_REQUESTS
    llm.ALLOW_REAL_REQUESTS = request.node.get_closest_marker("allow_real_llm") is not None
    try:
        yield
    finally:
        llm.ALLOW_REAL_REQUESTS = previous


@pytest.fixture
def fake_llm() -> FakeLLM:
    """A FakeLLM with an empty script."""
    return FakeLLM()


@pytest.fixture
def fake_llm_server() -> Iterator[Any]:
    """A FakeLLMServer on 127.0.0.1, stopped after the test."""
    from .server import FakeLLMServer

    with FakeLLMServer() as server:
        yield server
