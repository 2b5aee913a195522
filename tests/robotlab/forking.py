"""Run a function in a forked child of the test process and get what it returns, or a hang reported."""

from __future__ import annotations

import os
import select
import signal
import traceback
from collections.abc import Callable


class ChildHung(AssertionError):
    """The forked child did not answer in time (it was killed)."""


def run_in_fork(fn: Callable[[], str], timeout: float = 30) -> str:
    """Fork; the child runs ``fn()`` and writes its text (or its traceback) to a pipe, then exits.

    The parent waits for the pipe at most ``timeout`` seconds; a child that did not answer by
    then is killed and :class:`ChildHung` raised. The child never returns into pytest.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(read_end)
        try:
            try:
                answer = fn()
            except BaseException:
                answer = "error: " + traceback.format_exc()
            os.write(write_end, answer.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            raise ChildHung(f"the forked child did not answer within {timeout:g}s")
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
