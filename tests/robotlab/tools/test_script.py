from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from robotlab.config import configure, reload_config
from robotlab.robot import build
from robotlab.testing.fake import FakeLLM, text, tool_call
from robotlab.tools.script import (
    DEFAULT_TIMEOUT,
    MAX_OUTPUT_CHARS,
    TRUST_LEVELS,
    Capabilities,
    ScriptTool,
    format_result,
)


@pytest.fixture(autouse=True)
def fresh_config(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in [k for k in os.environ if k.startswith("ROBOT_LAB_")]:
        monkeypatch.delenv(name, raising=False)
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "robotlab"]


def script(folder: Path, name: str, body: str, *, executable: bool = True) -> Path:
    path = folder / name
    path.write_text(body)
    path.chmod(0o755 if executable else 0o644)
    return path


# -- Capabilities ------------------------------------------------------------------------

def test_capabilities_defaults() -> None:
    caps = Capabilities()
    assert caps.to_dict() == {"fs_read": [], "fs_write": [], "network": False, "timeout": 60, "trust": "external"}
    assert DEFAULT_TIMEOUT == 60
    assert TRUST_LEVELS == ("core", "external")
    assert not caps.is_core
    assert Capabilities(trust="core").is_core


@pytest.mark.parametrize("timeout", [0, -5, "soon", None, [3]])
def test_bad_timeout_is_the_default(timeout: Any) -> None:
    assert Capabilities(timeout=timeout).timeout == DEFAULT_TIMEOUT


def test_other_bad_values_become_defaults() -> None:
    caps = Capabilities(fs_read="docs", fs_write=None, network="", timeout="15", trust="root")
    assert (caps.fs_read, caps.fs_write, caps.network, caps.timeout, caps.trust) == (
        ["docs"], [], False, 15, "external")
    assert Capabilities(network=1).network is True


def test_from_front_matter_reads_capability_keys() -> None:
    caps = Capabilities.from_front_matter(
        {"name": "x", "fs_read": ["data"], "fs_write": "out", "network": True, "timeout": 5, "trust": "core"}
    )
    assert caps == Capabilities(fs_read=["data"], fs_write=["out"], network=True, timeout=5, trust="core")
    assert Capabilities.from_front_matter(None) == Capabilities()
    assert Capabilities.from_front_matter({"timeout": None, "trust": None}) == Capabilities()


def test_ceiling_comes_from_the_sandbox_settings() -> None:
    assert Capabilities.ceiling() == Capabilities(fs_read=["."], timeout=60)
    configure(sandbox={"fs_write": ["/tmp/out"], "network": True, "timeout": 10})
    assert Capabilities.ceiling() == Capabilities(fs_read=["."], fs_write=["/tmp/out"], network=True, timeout=10)
    assert Capabilities.ceiling(SimpleNamespace()) == Capabilities(fs_read=["."])
    assert Capabilities.ceiling(SimpleNamespace(sandbox=None)) == Capabilities(fs_read=["."])


def test_ceiling_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOT_LAB_SANDBOX__TIMEOUT", "7")
    reload_config()
    assert Capabilities.ceiling().timeout == 7


def test_intersect_keeps_paths_under_ceiling_roots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    declared = Capabilities(
        fs_read=["data", "data/sub", "/etc", f"{tmp_path}/database", "~/notes"],
        fs_write=["out/x", "data"],
        network=True,
        timeout=120,
        trust="core",
    )
    ceiling = Capabilities(fs_read=[str(tmp_path / "data"), "~"], fs_write=["out"], network=False, timeout=30)
    grant = declared.intersect(ceiling)
    assert grant.fs_read == [str(tmp_path / "data"), str(tmp_path / "data" / "sub"), str(tmp_path / "home" / "notes")]
    assert grant.fs_write == [str(tmp_path / "out" / "x")]
    assert (grant.network, grant.timeout, grant.trust) == (False, 30, "core")
    assert Capabilities(network=True, timeout=5).intersect(Capabilities(network=True, timeout=60)).to_dict() == {
        "fs_read": [], "fs_write": [], "network": True, "timeout": 5, "trust": "external"}


def test_format_result() -> None:
    assert format_result("fine\n", 0) == "fine\n"
    assert format_result("bad\n", 2) == "Error (exit 2):\nbad\n"
    assert format_result("partial", None) == "Error (timed out):\npartial"


# -- building ----------------------------------------------------------------------------

def test_not_executable_is_skipped_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = script(tmp_path, "notes.sh", "echo hi\n", executable=False)
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        assert ScriptTool.from_path(path) is None
        assert ScriptTool.from_path(tmp_path / "missing.sh") is None
    assert warnings(caplog) == [
        "ScriptTool: notes.sh is not executable, skipping",
        "ScriptTool: missing.sh is not executable, skipping",
    ]


@pytest.mark.parametrize(
    ("filename", "name"),
    [("check-style.sh", "check_style"), ("__run  tests__.py", "run_tests"), ("build.all.sh", "build_all"),
     ("lint", "lint")],
)
def test_name_is_derived_from_the_file_name(tmp_path: Path, filename: str, name: str) -> None:
    tool = ScriptTool.from_path(script(tmp_path, filename, "echo\n"))
    assert tool is not None and tool.name == name


def test_description_is_the_first_comment(tmp_path: Path) -> None:
    body = "#!/bin/bash\n#\n##  Counts the lines of a file\n# more\n"
    described = ScriptTool.from_path(script(tmp_path, "a.sh", body))
    plain = ScriptTool.from_path(script(tmp_path, "count-words.sh", "#!/bin/bash\nwc -w \"$@\"\n"))
    assert described is not None and described.description == "Counts the lines of a file"
    assert plain is not None and plain.description == "count_words"


def test_schema_has_one_optional_args_string(tmp_path: Path) -> None:
    tool = ScriptTool.from_path(script(tmp_path, "greet.sh", "# Greets someone\necho hi\n"), skill_dir=tmp_path)
    assert tool is not None
    assert tool.to_json_schema() == {
        "type": "function",
        "function": {
            "name": "greet",
            "description": "Greets someone",
            "parameters": {
                "type": "object",
                "properties": {"args": {"type": "string", "description": "Optional command-line arguments"}},
                "required": [],
            },
        },
    }
    assert tool.capabilities == Capabilities() and tool.skill_dir == tmp_path
    assert tool.command('one "two words"') == ["bash", str(tmp_path / "greet.sh"), "one", "two words"]


# -- running -----------------------------------------------------------------------------

def test_args_are_split_like_a_shell_but_never_run_by_one(tmp_path: Path) -> None:
    tool = ScriptTool.from_path(script(tmp_path, "show.sh", 'for a in "$@"; do echo "[$a]"; done\n'))
    assert tool is not None
    assert tool.call({"args": 'one "two words"'}) == "[one]\n[two words]\n"
    marker = tmp_path / "pwned"
    assert tool.call({"args": f"$(touch {marker}); echo `touch {marker}` | cat"}) == (
        f"[$(touch]\n[{marker});]\n[echo]\n[`touch]\n[{marker}`]\n[|]\n[cat]\n"
    )
    assert not marker.exists()
    assert tool.call({}) == ""
    assert tool.call({"args": "   "}) == ""


def test_stderr_is_captured_and_a_failure_shows_the_exit_code(tmp_path: Path) -> None:
    tool = ScriptTool.from_path(script(tmp_path, "fail.sh", "echo out\necho err >&2\nexit 3\n"))
    assert tool is not None
    assert tool.call({}) == "Error (exit 3):\nout\nerr\n"


def test_bad_args_are_errors_the_model_can_read(tmp_path: Path) -> None:
    tool = ScriptTool.from_path(script(tmp_path, "echo.sh", 'echo "$@"\n'))
    assert tool is not None
    assert tool.call({"args": 'unbalanced "quote'}) == (
        "Error (echo): args could not be split like shell arguments: No closing quotation"
    )
    assert tool.call({"args": ["a", "b"]}) == "Error (echo): args must be a string of command-line arguments, got list"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


def _wait_until(condition: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_a_hanging_script_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    body = f"echo started\nsleep 300 &\necho $! > {pid_file}\nwait\n"
    tool = ScriptTool.from_path(script(tmp_path, "hang.sh", body), capabilities=Capabilities(timeout=1))
    assert tool is not None
    assert tool.call({}) == "Error (timed out):\nstarted\n\n[killed: exceeded 1s]"
    child = int(pid_file.read_text())
    assert _wait_until(lambda: _gone(child)), "the script's background child outlived the timeout"


def test_the_ceiling_timeout_caps_the_declared_one(tmp_path: Path) -> None:
    configure(sandbox={"timeout": 1})
    tool = ScriptTool.from_path(script(tmp_path, "slow.sh", "sleep 300\n"), capabilities=Capabilities(timeout=600))
    assert tool is not None
    assert tool.call({}) == "Error (timed out):\n\n[killed: exceeded 1s]"


async def test_cancelling_a_call_kills_the_script(tmp_path: Path) -> None:
    pid_file = tmp_path / "script.pid"
    tool = ScriptTool.from_path(script(tmp_path, "wait.sh", f"echo $$ > {pid_file}\nsleep 300\n"))
    assert tool is not None
    task = asyncio.ensure_future(tool.acall({}))
    while not (pid_file.exists() and pid_file.read_text().strip()):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    pid = int(pid_file.read_text())
    assert await asyncio.to_thread(_wait_until, lambda: _gone(pid))


def test_output_is_capped(tmp_path: Path) -> None:
    count = MAX_OUTPUT_CHARS + 50
    tool = ScriptTool.from_path(script(tmp_path, "loud.sh", f"head -c {count} /dev/zero | tr '\\0' x\n"))
    assert tool is not None
    result = tool.call({})
    assert result == "x" * MAX_OUTPUT_CHARS + f"\n[output truncated at {MAX_OUTPUT_CHARS} characters]"


def test_an_executor_runs_the_command_instead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[list[str], Capabilities, str]] = []

    def executor(cmd: list[str], *, capabilities: Capabilities, skill_dir: str) -> str:
        seen.append((cmd, capabilities, skill_dir))
        return "ran elsewhere"

    caps = Capabilities(timeout=5, trust="core")
    path = script(tmp_path, "job.sh", "exit 9\n")
    monkeypatch.setattr(ScriptTool, "executor", executor)
    tool = ScriptTool.from_path(path, capabilities=caps, skill_dir=tmp_path / "bundle")
    assert tool is not None
    assert tool.call({"args": "--fast 'a b'"}) == "ran elsewhere"
    assert seen == [(["bash", str(path), "--fast", "a b"], caps, str(tmp_path / "bundle"))]

    async def async_executor(cmd: list[str], *, capabilities: Capabilities, skill_dir: str) -> str:
        return f"async {len(cmd)}"

    tool.executor = async_executor
    assert tool.call({}) == "async 2"
    monkeypatch.undo()
    assert ScriptTool.executor is None
    other = ScriptTool.from_path(path)
    assert other is not None and other.call({}) == "Error (exit 9):\n"


def test_a_robot_calls_a_script_tool_and_the_model_sees_its_output(tmp_path: Path) -> None:
    tool = ScriptTool.from_path(script(tmp_path, "greet.sh", '# Greets a person\necho "Hello, $1"\n'))
    llm = FakeLLM([tool_call("greet", args="Ada"), text("Greeted.")])
    robot = build(name="greeter", llm=llm, local_tools=[tool])
    result = robot.run("Greet Ada")
    assert result.reply == "Greeted."
    assert [t["function"]["name"] for t in llm.requests[0].tools] == ["greet"]
    assert llm.requests[1].messages[-1]["role"] == "tool"
    assert llm.requests[1].messages[-1]["content"] == "Hello, Ada\n"
