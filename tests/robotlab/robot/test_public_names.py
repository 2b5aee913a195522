"""A robot's public names are the documented ones (issue 32, item 4): each one is in a guide."""

from __future__ import annotations

import re
from pathlib import Path

import robotlab
from robotlab.testing.fake import FakeLLM

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _guides() -> str:
    pages = [*sorted((DOCS / "guides").glob("*.md")), DOCS / "getting-started.md"]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def test_every_public_name_of_a_robot_is_in_the_guides() -> None:
    robot = robotlab.build(name="clerk", llm=FakeLLM([]))
    names = sorted({name for name in [*dir(robotlab.Robot), *vars(robot)] if not name.startswith("_")})
    text = _guides()
    missing = [name for name in names if not re.search(rf"[`.]{name}\b", text)]
    assert missing == [], f"document these in docs/guides (or make them private or a part's): {missing}"

