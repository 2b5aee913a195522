"""The background loop sync callers share, and its shutdown at exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from robotlab import runtime
from tests.robotlab.forking import run_in_fork

ROOT = Path(__file__).resolve().parents[2]


async def _answer() -> int:
    return 42


def test_run_sync_runs_on_the_shared_loop_and_shutdown_stops_it() -> None:
    assert runtime.run_sync(_answer()) == 42
    loop, thread = runtime.get_loop(), runtime.shared().thread
    assert thread is not None and thread.is_alive()

    runtime.shutdown()

    assert not thread.is_alive()
    assert loop.is_closed()
    assert runtime.run_sync(_answer()) == 42  # a later caller gets a new loop
    assert runtime.get_loop() is not loop
    runtime.shutdown()
    runtime.shutdown()  # twice is harmless


def test_run_sync_refuses_to_block_its_own_loop() -> None:
    async def nested() -> None:
        coro = _answer()
        with pytest.raises(RuntimeError, match="await the coroutine instead"):
            runtime.run_sync(coro)

    runtime.run_sync(nested())


def test_a_script_using_litellm_exits_with_its_clients_closed() -> None:
    """litellm's cached clients are dropped at exit while the loop thread still runs."""
    script = textwrap.dedent(
        """
        import robotlab
        from robotlab.llm import LLMClient
        from robotlab.testing.server import FakeLLMServer, reply

        with FakeLLMServer(default=reply("hi there")) as server:
            llm = LLMClient(api_base=server.base_url, api_key="sk-fake")
            robot = robotlab.build(name="r", model="openai/gpt-4o-mini", llm=llm)
            print(robot.run("hello").reply)
            import litellm
            print("cached clients:", len(litellm.in_memory_llm_clients_cache.cache_dict) > 0)
            from robotlab import runtime
            runtime.shutdown()
            print("after shutdown:", len(litellm.in_memory_llm_clients_cache.cache_dict))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hi there", "cached clients: True", "after shutdown: 0"]


def test_run_sync_works_in_a_forked_child_of_a_process_that_used_the_loop() -> None:
    """The child inherits the loop but not its thread; without the at-fork reset its run_sync hangs
    (here: TimeoutError after 10 s)."""
    assert runtime.run_sync(_answer()) == 42
    parent_loop = runtime.get_loop()

    def child() -> str:
        value = runtime.run_sync(_answer(), timeout=10)
        thread = runtime.shared().thread
        assert thread is not None
        return f"{value} new-loop={runtime.get_loop() is not parent_loop} thread-alive={thread.is_alive()}"

    assert run_in_fork(child, timeout=20) == "42 new-loop=True thread-alive=True"
    assert runtime.get_loop() is parent_loop  # the parent's loop is untouched
    assert runtime.run_sync(_answer()) == 42


def test_a_loop_thread_is_stopped_in_a_forked_child_and_starts_again() -> None:
    loop_thread = runtime.LoopThread("test-loop")
    loop = loop_thread.start()
    try:

        def child() -> str:
            stopped = not loop_thread.is_running and loop_thread.loop is None
            again = loop_thread.start()
            value = runtime.block_on(again, _answer(), timeout=10)
            loop_thread.stop()
            return f"stopped={stopped} {value} new={again is not loop}"

        assert run_in_fork(child, timeout=20) == "stopped=True 42 new=True"
        assert loop_thread.loop is loop and loop_thread.is_running
        assert runtime.block_on(loop, _answer(), timeout=10) == 42
    finally:
        loop_thread.stop()
    assert loop.is_closed() and not loop_thread.is_running
