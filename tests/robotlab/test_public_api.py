from __future__ import annotations

import json
import subprocess
import sys

import robotlab


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert robotlab.__all__ == sorted(robotlab.__all__)
    for name in robotlab.__all__:
        assert getattr(robotlab, name) is not None, name


def test_public_names_have_docstrings() -> None:
    missing = [
        name
        for name in robotlab.__all__
        if callable(getattr(robotlab, name)) and not (getattr(robotlab, name).__doc__ or "").strip()
    ]
    assert missing == []


def test_unknown_attribute_raises_attribute_error() -> None:
    try:
        robotlab.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected AttributeError")


def test_submodules_are_reachable_as_attributes() -> None:
    assert robotlab.config.get_config() is robotlab.get_config()
    assert robotlab.tool_config.NONE == "none"


def test_import_is_fast_and_loads_neither_litellm_nor_django() -> None:
    code = (
        "import sys, time, json; t = time.perf_counter(); import robotlab; elapsed = time.perf_counter() - t;"
        "print(json.dumps({'elapsed': elapsed, 'mods': [m for m in ('litellm', 'django', 'channels', 'celery')"
        " if m in sys.modules]}))"
    )
    runs = [
        json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    assert all(run["mods"] == [] for run in runs)
    assert min(run["elapsed"] for run in runs) < 0.3


def test_building_a_robot_does_not_import_litellm() -> None:
    code = (
        "import sys, robotlab; from robotlab.testing import FakeLLM;"
        "r = robotlab.build(llm=FakeLLM(['hi'])); assert r.run('x').reply == 'hi';"
        "print('litellm' in sys.modules, 'django' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["False", "False"]
