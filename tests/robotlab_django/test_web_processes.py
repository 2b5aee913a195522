"""Two web processes on one channel layer: a client resumes on the other one (issue 12, acceptance).

Two daphne processes serve tests/robotlab_django/asgi.py on one Redis channel layer (database 11);
the database is a SQLite file every process shares. The driver (this module, run as
``python -m tests.robotlab_django.test_web_processes --workdir DIR``) runs a streaming run in a
thread of its own process, so its events reach the web processes only through the layer. A
client follows it on daphne #1, cuts its socket mid-stream, waits until events were stored after
its cursor, and resumes with ``?after=<cursor>`` on daphne #2 (daphne #1 is stopped meanwhile,
so nothing can come from it). The text it assembles must equal the stored ``RobotResult.reply``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.robotlab_django.faults import (
    ROOT,
    Processes,
    Watcher,
    _facts,
    _run_in_background,
    _setup,
    _stored_after,
    free_port,
    reachable,
    wait_for,
)

REDIS_URL = "redis://127.0.0.1:6379/11"
TOKENS, RATE = 300, 100
#: Seconds the whole drive may take.
TIMEOUT = 240


def _ws_url(port: int, thread_pk: int) -> str:
    return f"ws://127.0.0.1:{port}/ws/robotlab/threads/{thread_pk}/"


def _daphne(processes: Processes, name: str) -> int:
    port = free_port()
    processes.start(name, [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                           "tests.robotlab_django.asgi:application"])
    wait_for(lambda: reachable("127.0.0.1", port), f"{name} on port {port}")
    return port


def drive(workdir: Path) -> dict[str, Any]:
    """Start both daphnes, stream a run, move the client from #1 to #2 mid-stream; the facts as a dict."""
    from robotlab_django import services

    user, session = _setup()
    processes = Processes(workdir, dict(os.environ))
    try:
        first, second = _daphne(processes, "daphne1"), _daphne(processes, "daphne2")
        row = services.start_run(services.get_thread(None, user=user), "echo", "Go")
        client = Watcher(first, row.thread_id, session)
        moved: dict[str, Any] = {}

        def resume_on_the_second(cursor: int) -> bool:
            """Called while the client is away after its cut: point it at daphne #2, stop daphne #1."""
            if not moved:
                moved.update(cursor=cursor, connects=client.connects, events=client.events)
                client.url = _ws_url(second, row.thread_id)
                daphne1 = processes.by_name["daphne1"]
                daphne1.terminate()
                daphne1.wait(timeout=30)
            return _stored_after(row.pk, cursor)

        async def watch() -> None:
            import aiohttp

            async with aiohttp.ClientSession() as http:
                follow = asyncio.ensure_future(client.follow(http, row.run_id, drop_after=3, drops=1,
                                                             missed=resume_on_the_second))
                await asyncio.to_thread(wait_for, lambda: client.connects, "the client's first connection")
                runner = _run_in_background(row.pk)
                await follow
                await asyncio.to_thread(runner.join, 60)

        asyncio.run(watch())
    finally:
        processes.stop_all()
    return {"client_text": client.text.get(row.run_id, ""), "connects": client.connects, "moved": moved,
            "replayed": client.replayed, "live_after_reconnect": client.live_after_reconnect,
            "second_url": client.url, "second_port": second, "run": _facts(row.pk)}


@pytest.mark.slow
def test_a_client_that_drops_its_socket_on_one_daphne_resumes_on_the_other_with_the_saved_text(
        tmp_path: Path) -> None:
    if not reachable("127.0.0.1", 6379):
        pytest.skip("Redis at 127.0.0.1:6379 cannot be reached")
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "ROBOTLAB_TEST_DB": "sqlite",
           "ROBOTLAB_TEST_SQLITE_PATH": str(tmp_path / "db.sqlite3"), "ROBOTLAB_TEST_REDIS_URL": REDIS_URL,
           "ROBOTLAB_TEST_LLM": "benchmarks.streaming.PacedLLM", "BENCH_TOKENS": str(TOKENS),
           "BENCH_RATE": str(RATE),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    driver = subprocess.run([sys.executable, "-m", "tests.robotlab_django.test_web_processes", "--workdir",
                             str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    logs = "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-4000:]}"
                     for log in sorted(tmp_path.glob("*.log")))
    assert driver.returncode == 0, f"{driver.stdout}\n{driver.stderr[-8000:]}\n{logs}"
    facts = json.loads(driver.stdout.strip().splitlines()[-1])
    run = facts["run"]

    assert run["status"] == "completed" and run["reply"] == "".join(f"t{index} " for index in range(TOKENS))
    assert facts["moved"]["connects"] == 1 and facts["connects"] == 2  # one socket on each daphne
    assert facts["second_url"].startswith(f"ws://127.0.0.1:{facts['second_port']}/")
    for name in ("daphne1", "daphne2"):  # each web process's access log shows one websocket
        assert (tmp_path / f"{name}.log").read_text().count('"WSCONNECT /ws/robotlab/threads/') == 1, name
    assert 0 < facts["moved"]["events"] < TOKENS  # it left daphne #1 mid-stream
    assert facts["replayed"] > 0  # daphne #2 replayed what was stored while the client was away
    assert facts["live_after_reconnect"] > 0  # and sent live events it got through the channel layer
    assert facts["client_text"] == run["reply"] == run["replayed_text"]


def main() -> int:
    """Drive the scenario (the environment names the database and the layer) and print its facts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    import django

    django.setup()
    print(json.dumps(drive(args.workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
