"""``robotlab.build`` and ``Robot`` take their options as typed keywords: mypy flags a misspelt one (issue 32, item 4).

The snippet is checked by mypy (strict) against this checkout's ``robotlab``; third-party packages are not
followed, so the check reads only the core.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SNIPPET = textwrap.dedent('''\
    import robotlab
    from robotlab.robot import Robot, RobotOptions, build

    robotlab.build(name="ok", temperature=0.2, max_tool_rounds=3, tools=["lookup"], skills="tone")
    Robot(RobotOptions(name="base"), system_prompt="Be brief.", local_tools=[print], token_budget=1_000)
    build(name="typo", temprature=0.5)
    Robot(name="typo", max_tool_round=3)
    build(name="wrong type", max_tokens="many")
    robotlab.Robot(name="ok").spawn(name="child", tempreture=0.1)
''')


def _mypy(tmp_path: Path, code: str) -> list[str]:
    pytest.importorskip("mypy")
    config = tmp_path / "mypy.ini"
    config.write_text(textwrap.dedent(f"""\
        [mypy]
        python_version = 3.11
        strict = True
        ignore_missing_imports = True
        follow_imports = skip
        mypy_path = {ROOT}
        cache_dir = {ROOT / ".mypy_cache" / "typed-options"}

        [mypy-robotlab.*]
        follow_imports = silent
    """))
    snippet = tmp_path / "snippet.py"
    snippet.write_text(code)
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), str(snippet)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    found = [line.split("snippet.py:", 1)[1] for line in done.stdout.splitlines() if "snippet.py:" in line]
    return [line for line in found if ": error: " in line]


@pytest.mark.slow
def test_mypy_flags_a_misspelt_or_mistyped_option_and_accepts_the_right_ones(tmp_path: Path) -> None:
    errors = _mypy(tmp_path, SNIPPET)
    assert [line.split(":", 1)[0] for line in errors] == ["6", "7", "8", "9"], errors
    assert 'Unexpected keyword argument "temprature" for "build"' in errors[0]
    assert 'Unexpected keyword argument "max_tool_round" for "Robot"' in errors[1]
    assert '"max_tokens"' in errors[2] and "int | None" in errors[2]
    assert 'Unexpected keyword argument "tempreture" for "spawn" of "Robot"' in errors[3]
