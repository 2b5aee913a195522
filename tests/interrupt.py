"""Ctrl-C stops the test run, whatever it is waiting on (issue 26, item 16).

Python's own SIGINT handling can leave pytest running for ever: ``asyncio.run`` turns the first SIGINT into a
cancellation, then waits for its executor's threads (``asyncio.to_thread``, ``sync_to_async``) without a limit, and
the interpreter joins them again at exit; a thread blocked on a worker that never answers keeps the run alive
through any number of Ctrl-C. So the suite handles SIGINT itself (tests/conftest.py loads this module):

* the first SIGINT raises ``KeyboardInterrupt`` in the main thread, as Python's default does, so pytest tears the
  fixtures down (stopping their workers and servers) and reports;
* a second SIGINT, or ``GRACE`` seconds after the first with the run still alive, prints every thread's stack (what
  it was stuck on), ends the processes the run started (its descendants, by pid) and exits with status 130.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

#: Seconds the run may take to stop after the first SIGINT before it is ended (``ROBOTLAB_TEST_INTERRUPT_GRACE``).
GRACE = float(os.environ.get("ROBOTLAB_TEST_INTERRUPT_GRACE", "30"))

_interrupted = threading.Event()
_finished = threading.Event()
_previous: Any = None
_config: Any = None


def _descendants(root: int) -> list[int]:
    """The pids of ``root``'s descendants (Linux ``/proc``), children first."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    pending = [root]
    while pending:
        children = parents.get(pending.pop(), [])
        found += children
        pending += children
    return found


def _stop_now(reason: str) -> None:
    capture = _config.pluginmanager.getplugin("capturemanager") if _config is not None else None
    if capture is not None:  # write where the person who pressed Ctrl-C looks, not into a test's capture
        try:
            capture.suspend_global_capture(in_=True)
        except Exception:
            pass
    sys.stdout.flush()
    print(f"\n{reason}: the stacks of the run's threads, then it ends with the processes it started",
          file=sys.stderr, flush=True)
    faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    sys.stderr.flush()
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    os._exit(130)


def _watchdog() -> None:
    if not _finished.wait(GRACE):
        _stop_now(f"the test run did not stop within {GRACE:g} s of Ctrl-C")



def _on_sigint(signum: int, frame: FrameType | None) -> None:
    if _interrupted.is_set():
        _stop_now("a second Ctrl-C")
    _interrupted.set()
    threading.Thread(target=_watchdog, name="sigint-watchdog", daemon=True).start()
    raise KeyboardInterrupt


def pytest_configure(config: Any) -> None:
    """Take SIGINT over for the run (only in the main thread, where signals are handled)."""
    global _previous, _config
    _config = config
    if threading.current_thread() is threading.main_thread():
        _previous = signal.signal(signal.SIGINT, _on_sigint)


def pytest_unconfigure(config: Any) -> None:
    """Give SIGINT back, unless the run was interrupted: then the interpreter may still join stuck threads at exit,
    and the watchdog and a second Ctrl-C still end it."""
    if _interrupted.is_set():
        return
    _finished.set()
    if _previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _previous)
