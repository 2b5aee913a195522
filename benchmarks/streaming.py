"""Benchmark B2: a real Celery worker -> channels-redis -> daphne -> N websocket clients.

Run it standalone (Redis must answer on 127.0.0.1:6379; database 14 is used and flushed)::

    .venv/bin/python benchmarks/streaming.py                        # 10 clients, 300 tokens at 100 tok/s
    .venv/bin/python benchmarks/streaming.py --clients 50 --json    # figures as JSON

Each client owns a thread and watches it over the websocket; one run per thread is queued at once.
The model (:class:`PacedLLM`) streams ``--tokens`` tokens at ``--rate`` tokens/s. Reported:
delivered/produced tokens live and after replay (from the stored ``RunEvent`` rows), tokens per
websocket frame, the emit-to-receive latency of text deltas (the client's receive time minus the
worker's ``ts`` of the first piece in the delta, so it includes the 50 ms coalescing window), and
the aggregate tokens/s. Targets (spec reliability_perf B2): delivered/produced 1.000 after replay
and >= 0.999 live; >= 5 tokens per message; p99 <= 50 ms (Redis) beyond the coalescing window.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

REDIS_URL = "redis://127.0.0.1:6379/14"
TARGETS = {"delivered_after_replay": 1.0, "delivered_live": 0.999, "tokens_per_frame": 5.0,
           "latency_p99_ms_beyond_window": 50.0}


class PacedLLM:
    """A model streaming ``BENCH_TOKENS`` tokens (``t0 t1 ...``) at ``BENCH_RATE`` tokens/s."""

    async def complete(self, request: Any, *, on_text: Any = None) -> Any:
        """Stream the tokens, then answer with all of them."""
        from robotlab.llm import LLMResponse

        count, rate = int(os.environ.get("BENCH_TOKENS", "300")), float(os.environ.get("BENCH_RATE", "100"))
        pieces = [f"t{index} " for index in range(count)]
        started = time.monotonic()
        for index, piece in enumerate(pieces):
            if on_text is not None:
                on_text(piece)
            delay = started + (index + 1) / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        return LLMResponse(content="".join(pieces), input_tokens=10, output_tokens=count,
                           finish_reason="stop", model="paced")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


def _setup(clients: int) -> list[tuple[int, str]]:
    """Migrate, and create one user, session and thread per client: ``[(thread pk, session id)]``."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from robotlab_django import services

    call_command("migrate", verbosity=0)
    pairs = []
    for index in range(clients):
        user = get_user_model().objects.create_user(f"bench{index}", password="pw")
        client = Client()
        client.force_login(user)
        pairs.append((services.get_thread(None, user=user).pk, client.cookies["sessionid"].value))
    return pairs


def _enqueue(thread_pks: list[int], queue: str) -> None:
    from django.db import transaction

    from robotlab_django import services, tasks

    with transaction.atomic():
        for pk in thread_pks:
            tasks.enqueue(services.start_run(pk, "echo", "Go"), queue=queue)


async def _watch(http: Any, port: int, thread_pk: int, session: str, timeout: float) -> dict[str, Any]:
    socket_ = await http.ws_connect(f"ws://127.0.0.1:{port}/ws/robotlab/threads/{thread_pk}/",
                                    headers={"Origin": "http://localhost", "Cookie": f"sessionid={session}"})
    return {"socket": socket_, "thread": thread_pk, "timeout": timeout}


async def _collect(watch: dict[str, Any]) -> dict[str, Any]:
    socket_, tokens, frames, latencies, ended = watch["socket"], 0, 0, [], False
    deadline = time.monotonic() + watch["timeout"]
    while not ended:
        frame = json.loads(await socket_.receive_str(timeout=max(0.1, deadline - time.monotonic())))
        received = time.time()
        if frame.get("type") != "events":
            continue
        frames += 1
        for event in frame["events"]:
            if event["kind"] == "text.delta":
                tokens += len(event["text"].split())
                latencies.append((received - event["ts"]) * 1000)
            ended = ended or event["kind"] == "stream.ended"
    await socket_.close()
    return {"tokens": tokens, "frames": frames, "latencies": latencies, "ended_at": time.time()}


async def _drive(port: int, pairs: list[tuple[int, str]], queue: str, timeout: float) -> dict[str, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        watches = [await _watch(http, port, pk, session, timeout) for pk, session in pairs]
        started = time.time()
        await asyncio.to_thread(_enqueue, [pk for pk, _ in pairs], queue)
        results = await asyncio.wait_for(asyncio.gather(*(_collect(watch) for watch in watches)), timeout)
    return {"started": started, "results": results}


def _stored_tokens(thread_pks: list[int]) -> int:
    from robotlab_django.models import RunEvent

    deltas = RunEvent.objects.filter(thread_id__in=thread_pks, kind="text.delta")
    texts = deltas.values_list("data", flat=True)
    return sum(len(str(data.get("text", "")).split()) for data in texts)


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


def run(clients: int, tokens: int, rate: float, timeout: float) -> dict[str, Any]:
    """Run the benchmark once and return its figures."""
    workdir = Path(tempfile.mkdtemp(prefix="robotlab-b2-"))
    queue = f"robotlab-bench-{uuid.uuid4().hex[:8]}"
    env = {"DJANGO_SETTINGS_MODULE": "tests.robotlab_django.settings", "ROBOTLAB_TEST_DB": "sqlite",
           "ROBOTLAB_TEST_SQLITE_PATH": str(workdir / "db.sqlite3"), "ROBOTLAB_TEST_REDIS_URL": REDIS_URL,
           "ROBOTLAB_TEST_LLM": "benchmarks.streaming.PacedLLM", "BENCH_TOKENS": str(tokens),
           "BENCH_RATE": str(rate), "PYTHONPATH": str(ROOT)}
    os.environ.update(env)
    import django

    django.setup()
    import redis

    import tests.robotlab_django.celery_app  # noqa: F401  (the tasks are sent through its broker)

    redis.Redis.from_url(REDIS_URL).flushdb()
    pairs = _setup(clients)
    port = _free_port()
    child_env = {**os.environ, **env}
    processes = [
        subprocess.Popen([sys.executable, "-m", "celery", "-A", "tests.robotlab_django.celery_app", "worker",
                          "--pool=threads", "-c", str(clients), "-Q", queue, "-l", "warning",
                          "--without-gossip", "--without-mingle", "--without-heartbeat"],
                         cwd=ROOT, env=child_env, stdout=subprocess.DEVNULL,
                         stderr=(workdir / "worker.log").open("w")),
        subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                          "tests.robotlab_django.asgi:application"], cwd=ROOT, env=child_env,
                         stdout=subprocess.DEVNULL, stderr=(workdir / "daphne.log").open("w")),
    ]
    try:
        _wait_for_port(port, 30)
        outcome = asyncio.run(_drive(port, pairs, queue, timeout))
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
    results = outcome["results"]
    produced = clients * tokens
    live = sum(result["tokens"] for result in results)
    frames = sum(result["frames"] for result in results)
    latencies = [value for result in results for value in result["latencies"]]
    wall = max(result["ended_at"] for result in results) - outcome["started"]
    replayed = _stored_tokens([pk for pk, _ in pairs])
    shutil.rmtree(workdir, ignore_errors=True)
    return {
        "clients": clients, "tokens_per_run": tokens, "rate_per_run": rate, "produced": produced,
        "delivered_live": live / produced, "delivered_after_replay": replayed / produced,
        "frames": frames, "tokens_per_frame": live / frames if frames else 0.0,
        "latency_ms": {"p50": _percentile(latencies, 0.5), "p99": _percentile(latencies, 0.99),
                       "mean": statistics.fmean(latencies) if latencies else 0.0},
        "coalescing_window_ms": 50.0, "tokens_per_s": live / wall if wall > 0 else 0.0, "wall_s": wall,
    }


def main() -> int:
    """Parse the options, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--rate", type=float, default=100.0, help="Tokens per second per run.")
    parser.add_argument("--timeout", type=float, default=120.0, help="Seconds a client waits for its run.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=3).close()
    except OSError as exc:
        print(f"Redis at 127.0.0.1:6379 cannot be reached: {exc}", file=sys.stderr)
        return 2
    result = run(args.clients, args.tokens, args.rate, args.timeout)
    report = {"benchmark": "B2 streaming", "python": platform.python_version(), "machine": platform.machine(),
              "cpus": os.cpu_count(), "targets": TARGETS, "results": [result]}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        latency = result["latency_ms"]
        print(f"B2: {result['clients']} clients x {result['tokens_per_run']} tokens at "
              f"{result['rate_per_run']:g} tok/s (Celery worker -> channels-redis -> daphne -> websocket)")
        print(f"  delivered/produced live   {result['delivered_live']:.4f}   after replay "
              f"{result['delivered_after_replay']:.4f}")
        print(f"  frames {result['frames']}, {result['tokens_per_frame']:.1f} tokens per frame")
        print(f"  emit->receive latency p50 {latency['p50']:.1f} ms, p99 {latency['p99']:.1f} ms "
              f"(includes the {result['coalescing_window_ms']:g} ms coalescing window)")
        print(f"  throughput {result['tokens_per_s']:.0f} tokens/s over {result['wall_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
