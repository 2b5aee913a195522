"""``robotlab.llm`` as a package: its names, and its guard flag shared with :mod:`robotlab.llm.guard`."""

from __future__ import annotations

import subprocess
import sys

import pytest

import robotlab.llm
from robotlab.llm import guard
from robotlab.llm.direct import OpenAICompatibleLLM


def test_every_name_of_the_package_resolves() -> None:
    for name in robotlab.llm.__all__:
        assert getattr(robotlab.llm, name) is not None, name
    assert robotlab.llm.OpenAICompatibleLLM is OpenAICompatibleLLM


def test_the_package_flag_is_the_guard_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guard, "ALLOW_REAL_REQUESTS", True)
    robotlab.llm.ALLOW_REAL_REQUESTS = False
    assert guard.ALLOW_REAL_REQUESTS is False
    with pytest.raises(robotlab.llm.RealRequestBlocked, match="'openai/gpt-4o-mini' blocked"):
        robotlab.llm.check_allow_real_requests("openai/gpt-4o-mini", None)
    robotlab.llm.check_allow_real_requests("openai/gpt-4o-mini", "http://127.0.0.1:8000/v1")  # loopback
    guard.ALLOW_REAL_REQUESTS = True
    assert robotlab.llm.ALLOW_REAL_REQUESTS is True
    robotlab.llm.check_allow_real_requests("openai/gpt-4o-mini", None)


def test_importing_the_package_loads_neither_litellm_nor_httpx() -> None:
    code = "import sys, robotlab.llm; print('litellm' in sys.modules, 'httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize(("setting", "frozen"), [(None, True), ("false", False)])
def test_loading_litellm_freezes_what_is_alive_then_unless_turned_off(setting: str | None, frozen: bool) -> None:
    """litellm's 380,000 import-time objects leave the garbage collector's full collections (``gc.freeze``)."""
    import os

    code = ("import gc; from robotlab.llm import load_litellm; before = gc.get_freeze_count(); load_litellm(); "
            "print(before, gc.get_freeze_count())")
    env = {k: v for k, v in os.environ.items() if k != "ROBOT_LAB_GC_FREEZE"}
    if setting is not None:
        env["ROBOT_LAB_GC_FREEZE"] = setting
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env).stdout
    before, after = map(int, out.split())
    assert before == 0
    assert (after > 100_000) is frozen, out
