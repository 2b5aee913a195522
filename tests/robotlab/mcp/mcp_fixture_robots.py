"""Robots on the FakeLLM for ``python -m robotlab.mcp.server mcp_fixture_robots:echo``."""

from __future__ import annotations

import robotlab
from robotlab.testing import FakeLLM, text

echo = robotlab.build(
    name="echo",
    description="Answers with a fixed greeting",
    system_prompt="You greet.",
    llm=FakeLLM(default=text("hello from the echo robot")),
)
