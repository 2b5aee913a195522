"""Ctrl-C stops the test run even when a test waits on a thread that never returns (issue 26, item 16).

Before tests/interrupt.py, pytest went on through any number of SIGINTs: ``asyncio.run`` waited for its stuck
executor thread, then the interpreter joined it at exit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

HANGING = '''
import asyncio, os, pathlib, threading

def test_waits_on_a_thread_that_never_returns():
    async def main():
        pathlib.Path(os.environ["MARK"]).write_text("waiting")
        await asyncio.to_thread(threading.Event().wait)  # a worker that never answers, without a timeout
    asyncio.run(main())
'''


def _started(tmp_path: Path, grace: str) -> tuple[subprocess.Popen[str], Path]:
    (tmp_path / "test_hanging.py").write_text(HANGING)
    mark = tmp_path / "mark"
    env = {**os.environ, "MARK": str(mark), "ROBOTLAB_TEST_INTERRUPT_GRACE": grace,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    process = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.interrupt",
                                "--rootdir", str(tmp_path), str(tmp_path / "test_hanging.py")],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while not mark.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the hanging test did not start:\n{process.communicate(timeout=30)[0]}")
        time.sleep(0.05)
    return process, mark


@pytest.mark.parametrize("second", [False, True], ids=["grace", "second-ctrl-c"])
def test_ctrl_c_stops_a_run_stuck_on_a_thread(tmp_path: Path, second: bool) -> None:
    process, _mark = _started(tmp_path, grace="60" if second else "2")
    process.send_signal(signal.SIGINT)
    if second:
        try:  # the first Ctrl-C cannot stop it (the stuck thread is joined): the second one does, at once
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail(f"pytest ignored SIGINT:\n{process.communicate(timeout=30)[0]}")
    assert process.returncode in (2, 130), output  # interrupted (pytest's 2) or ended by the watchdog
    assert "KeyboardInterrupt" in output or "Ctrl-C" in output, output


def test_the_suite_handles_ctrl_c_itself() -> None:
    from tests import interrupt

    assert signal.getsignal(signal.SIGINT) is interrupt._on_sigint  # tests/conftest.py loads it for every run


def test_every_test_has_a_time_limit(pytestconfig: pytest.Config) -> None:
    assert 0 < float(pytestconfig.getini("timeout")) <= 900  # pytest-timeout: a hang fails its test, fixtures included
