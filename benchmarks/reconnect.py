"""Benchmark B6: reconnect replay. Websocket clients drop their socket every 2 s mid-stream and resume.

Run it standalone (Redis must answer on 127.0.0.1:6379; database 14 is used, under this run's own
queue, key and channel names, so it may be shared)::

    .venv/bin/python benchmarks/reconnect.py                     # 50 runs, 10 at a time, SQLite (WAL)
    .venv/bin/python benchmarks/reconnect.py --db postgres
    .venv/bin/python benchmarks/reconnect.py --resume frame      # a {"type": "resume"} frame, as robotlab.js
    .venv/bin/python benchmarks/reconnect.py --away 0.5          # stay away 0.5 s: the replay has more to send
    .venv/bin/python benchmarks/reconnect.py --runs 10 --json    # figures as JSON
    .venv/bin/python benchmarks/reconnect.py --web 2             # two daphnes: each resume on the other one

The stack is B2's (:mod:`benchmarks.streaming`, whose helpers this imports): a real Celery worker
streams each run from the paced model (``--tokens`` 1,000 at ``--rate`` 100 tokens/s, 10 s)
through channels-redis (``RedisPubSubChannelLayer`` unless ``--layer redis``) to daphne. Each of
``--runs`` threads gets one client; ``--concurrency`` of them stream at once. A client connects,
queues its run, keeps the last ``cursor`` it saw and closes its socket every ``--drop-every``
seconds, reconnecting at once (or ``--away`` seconds later) with ``?after=<cursor>``, until
``stream.ended``. With ``--resume frame`` it behaves as ``robotlab.js``: every socket, the first
one too, sends ``{"type": "resume", "after": <cursor>}`` once it is open. It assembles the text as
``robotlab.js`` does, dropping events whose per-run ``seq`` it has already seen. With ``--web N``,
N daphne processes serve the same app on the one channel layer and each reconnect goes to the next
one, so every resume is served by another process than the socket it dropped (issue 12).
``--redis-url`` picks the Redis database of the layer and broker (never flushed: another run may share it).

A run is **exact** when the client's text equals both the saved ``RobotResult.reply`` and the
``text.delta`` events stored as ``RunEvent`` rows (and the model's text). The client also keeps every
cursor it received, so a mismatch names the stored events it never got and the ones it got twice.
**Resync latency** runs from the start of the reconnect (the websocket handshake, after the old
socket has closed) to the ``replayed`` frame; **first live** runs to the first live frame after it.
The spec's targets: exact text in 100 % of 50 runs, resync p99 <= 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import benchmarks.streaming as streaming  # noqa: E402
from benchmarks.streaming import (  # noqa: E402
    _configure,
    _enqueue,
    _free_port,
    _headers,
    _pieces,
    _postgres,
    _setup,
    _spread,
    _start_processes,
    _stop,
    _url,
    _wait_for_port,
    redis_missing,
)

TARGETS = {"exact_text_fraction": 1.0, "resync_p99_ms": 200.0}


async def _client(http: Any, ports: list[int], pair: tuple[int, str], queue: str, drop_every: float, away: float,
                  resume: str, timeout: float) -> dict[str, Any]:
    """Follow one run to ``stream.ended``, dropping the socket every ``drop_every`` s; what it saw.

    The first socket goes to ``ports[0]``; each reconnect goes to the next port, round robin.
    """
    import aiohttp

    thread_pk, session = pair
    seen_seq: dict[str, int] = {}  # the last seq applied, per run
    text: list[str] = []
    cursors: list[int] = []  # every cursor received, repeats included
    resync: list[float] = []
    handshake: list[float] = []
    first_live: list[float] = []
    cursor, uncursored, skipped, replayed_events, server_closes, drops = 0, 0, 0, 0, 0, 0
    began: float | None = None  # when the current reconnect started
    ended, deadline = False, time.monotonic() + timeout
    port = ports[0]
    socket_ = await asyncio.wait_for(http.ws_connect(_url(port, thread_pk), headers=_headers(session)), 60)
    if resume == "frame":  # as robotlab.js: every socket, the first too, resumes after the cursor it has
        await socket_.send_json({"type": "resume", "after": cursor})
    await asyncio.to_thread(_enqueue, [thread_pk], queue)
    synced, live_seen, drop_at = resume != "frame", True, time.monotonic() + drop_every
    while not ended and time.monotonic() < deadline:
        try:  # an unsynced socket is not dropped: the replay's latency is always measured
            wait = deadline - time.monotonic() if not synced else min(drop_at, deadline) - time.monotonic()
            message = await asyncio.wait_for(socket_.receive(), max(0.0, wait))
        except TimeoutError:
            message = None
        if message is not None and message.type != aiohttp.WSMsgType.TEXT:
            server_closes += 1  # the server closed (or the socket broke): resume like a drop
        elif message is not None:
            frame, received = json.loads(message.data), time.monotonic()
            if frame.get("type") == "replayed":
                synced = True
                if began is not None:
                    resync.append((received - began) * 1000)
                cursor = max(cursor, int(frame["cursor"]))
                continue
            if frame.get("type") != "events":
                continue
            if "t_emit" in frame and not live_seen and began is not None:
                live_seen = True
                first_live.append((received - began) * 1000)
            if not synced and "t_emit" not in frame:
                replayed_events += len(frame["events"])
            for event in frame["events"]:
                if isinstance(event.get("cursor"), int):
                    cursors.append(event["cursor"])
                    cursor = max(cursor, event["cursor"])
                else:
                    uncursored += 1  # its store failed: sent live only, not replayable
                if event["seq"] <= seen_seq.get(event["run_id"], 0):
                    skipped += 1
                    continue
                seen_seq[event["run_id"]] = event["seq"]
                if event["kind"] == "text.delta":
                    text.append(event["text"])
                ended = ended or event["kind"] == "stream.ended"
            continue
        if ended or time.monotonic() >= deadline:
            break
        await asyncio.wait_for(socket_.close(), 30)
        drops += 1
        port = ports[drops % len(ports)]
        if away:
            await asyncio.sleep(away)
        began, synced, live_seen = time.monotonic(), False, False
        if resume == "url":
            socket_ = await asyncio.wait_for(
                http.ws_connect(_url(port, thread_pk, after=cursor), headers=_headers(session)), 60)
        else:
            socket_ = await asyncio.wait_for(http.ws_connect(_url(port, thread_pk), headers=_headers(session)), 60)
            await socket_.send_json({"type": "resume", "after": cursor})
        handshake.append((time.monotonic() - began) * 1000)
        drop_at = began + drop_every
    await asyncio.wait_for(socket_.close(), 30)
    return {"thread": thread_pk, "text": "".join(text), "ended": ended, "drops": drops,
            "server_closes": server_closes, "resync_ms": resync, "handshake_ms": handshake, "first_live_ms": first_live,
            "replayed_events": replayed_events, "cursors": cursors, "uncursored": uncursored,
            "skipped_by_seq": skipped}


async def _drive(ports: list[int], pairs: list[tuple[int, str]], queue: str, concurrency: int, drop_every: float,
                 away: float, resume: str, timeout: float) -> list[dict[str, Any]]:
    import aiohttp

    slots = asyncio.Semaphore(concurrency)

    async def one(pair: tuple[int, str]) -> dict[str, Any]:
        async with slots:
            return await _client(http, ports, pair, queue, drop_every, away, resume, timeout)

    async with aiohttp.ClientSession() as http:
        async def warm(port: int, pair: tuple[int, str]) -> None:
            socket_ = await asyncio.wait_for(http.ws_connect(_url(port, pair[0]), headers=_headers(pair[1])), 60)
            await asyncio.wait_for(socket_.close(), 30)

        # a process's first sockets are slower (its worker threads' first sessions and queries): not measured
        await asyncio.gather(*(warm(port, pair) for port in ports[1:] for pair in pairs[:concurrency]))
        return list(await asyncio.gather(*(one(pair) for pair in pairs)))


def _check(result: dict[str, Any], expected: str) -> dict[str, Any]:
    """Compare a client's text and cursors with what the database holds for its thread."""
    from robotlab_django.conf import app_settings

    rows = list(app_settings.event_model().objects.filter(thread_id=result["thread"]).order_by("pk"))
    stored = "".join(row.data.get("text", "") for row in rows if row.kind == "text.delta")
    reply = app_settings.result_model().objects.filter(thread_id=result["thread"]).values_list("reply", flat=True)
    received = Counter(result["cursors"])
    missing = [{"cursor": row.pk, "kind": row.kind, "seq": row.seq} for row in rows if row.pk not in received]
    return {"exact": result["text"] == stored == (reply[0] if reply else None), "model_text": stored == expected,
            "missing": missing, "duplicated": sorted(pk for pk, count in received.items() if count > 1),
            "text_chars": [len(result["text"]), len(stored)]}


def _more_daphnes(count: int, workdir: Path) -> tuple[list[int], dict[str, Any]]:
    """``count`` more daphne processes serving the benchmark's app: their ports and processes."""
    ports, processes = [], {}
    for index in range(2, count + 2):
        port = _free_port()
        processes[f"daphne{index}"] = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
             "tests.robotlab_django.asgi:application"], cwd=ROOT, env={**os.environ}, stdout=subprocess.DEVNULL,
            stderr=(workdir / f"daphne{index}.log").open("w"))
        ports.append(port)
    return ports, processes


def run(runs: int, concurrency: int, tokens: int, drop_every: float, away: float, resume: str, timeout: float,
        layer: str, workdir: Path, web: int = 1) -> dict[str, Any]:
    """Run the benchmark once (``web`` daphne processes) and return its figures."""
    tag = uuid.uuid4().hex[:8]
    pairs = _setup(runs, tag)
    port, queue = _free_port(), f"robotlab-bench-{tag}"
    processes = _start_processes(layer, concurrency, queue, port, workdir)
    more_ports, more = _more_daphnes(web - 1, workdir)
    processes.update(more)
    ports = [port, *more_ports]
    try:
        for each in ports:
            _wait_for_port(each, 30)
        time.sleep(2.0)  # let the worker start consuming
        load, started = os.getloadavg()[0], time.monotonic()
        results = asyncio.run(_drive(ports, pairs, queue, concurrency, drop_every, away, resume, timeout))
        wall = time.monotonic() - started
    except BaseException:
        for name in processes:
            print(f"--- the end of the {name}'s log:\n{(workdir / f'{name}.log').read_text()[-3000:]}",
                  file=sys.stderr)
        raise
    finally:
        _stop(processes)
    expected = "".join(_pieces(tokens))
    checks = [_check(result, expected) for result in results]
    resync = [value for result in results for value in result["resync_ms"]]
    exact = sum(check["exact"] for check in checks)
    failures = [{"thread": result["thread"], "ended": result["ended"], "uncursored": result["uncursored"], **check}
                for result, check in zip(results, checks, strict=True) if not check["exact"]]
    return {
        "runs": runs, "concurrency": concurrency, "tokens_per_run": tokens, "drop_every_s": drop_every, "away_s": away,
        "resume": resume, "layer": layer, "web_processes": web, "exact_runs": exact,
        "exact_text_fraction": exact / runs,
        "model_text_runs": sum(check["model_text"] for check in checks),
        "streams_ended": sum(result["ended"] for result in results),
        "drops": sum(result["drops"] for result in results),
        "server_closes": sum(result["server_closes"] for result in results),
        "replayed_events": sum(result["replayed_events"] for result in results),
        "skipped_by_seq": sum(result["skipped_by_seq"] for result in results),
        "resync_ms": _spread(resync),
        "handshake_ms": _spread([value for result in results for value in result["handshake_ms"]]),
        "first_live_ms": _spread([value for result in results for value in result["first_live_ms"]]),
        "pass": exact == runs and _spread(resync)["p99"] <= TARGETS["resync_p99_ms"],
        "failures": failures, "wall_s": wall, "load_average_1min": [load, os.getloadavg()[0]],
    }


def _print(result: dict[str, Any]) -> None:
    resync, handshake, live = result["resync_ms"], result["handshake_ms"], result["first_live_ms"]
    print(f"  exact text (client == RobotResult.reply == stored RunEvent deltas): {result['exact_runs']} of "
          f"{result['runs']} runs (target 100 %); equal to the model's text: {result['model_text_runs']}; "
          f"stream.ended seen by {result['streams_ended']}")
    print(f"  drops {result['drops']} (server closes {result['server_closes']}); {result['replayed_events']} events "
          f"came back in replays; {result['skipped_by_seq']} dropped by the client as seen (seq)")
    print(f"  resync (reconnect -> replayed) p50 {resync['p50']:.1f} ms, p99 {resync['p99']:.1f} ms, "
          f"max {resync['max']:.1f} ms (target p99 <= {TARGETS['resync_p99_ms']:.0f} ms)")
    print(f"    of which the handshake     p50 {handshake['p50']:.1f} ms, p99 {handshake['p99']:.1f} ms, "
          f"max {handshake['max']:.1f} ms (the upgrade: session, owner check, group_add)")
    print(f"  reconnect -> first live frame  p50 {live['p50']:.1f} ms, p99 {live['p99']:.1f} ms, "
          f"max {live['max']:.1f} ms")
    for failure in result["failures"][:5]:
        print(f"  MISMATCH thread {failure['thread']}: chars client/stored {failure['text_chars']}, ended "
              f"{failure['ended']}, missing {failure['missing'][:10]}, duplicated {failure['duplicated'][:10]}, "
              f"live-only events {failure['uncursored']}")
    before, after = result["load_average_1min"]
    print(f"  {result['wall_s']:.1f} s; machine load average (1 min) {before:.1f} before, {after:.1f} after, "
          f"on {os.cpu_count()} CPUs")
    print(f"  {'PASS' if result['pass'] else 'FAIL'}")


def main() -> int:
    """Parse the options, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="Runs (one thread and client each).")
    parser.add_argument("--concurrency", type=int, default=10, help="Runs streaming at once (Celery -c).")
    parser.add_argument("--tokens", type=int, default=1000, help="Tokens per run.")
    parser.add_argument("--rate", type=float, default=100.0, help="Tokens per second per run.")
    parser.add_argument("--drop-every", type=float, default=2.0, help="Seconds between a client's socket drops.")
    parser.add_argument("--away", type=float, default=0.0,
                        help="Seconds a client stays disconnected before it reconnects (default: none).")
    parser.add_argument("--resume", choices=("url", "frame"), default="url",
                        help="Reconnect with ?after=<cursor>, or send a resume frame after connecting.")
    parser.add_argument("--timeout", type=float, default=None,
                        help="Seconds a client follows its run (default: its duration + 60).")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--layer", choices=("pubsub", "redis"), default="pubsub",
                        help="channels-redis' RedisPubSubChannelLayer or RedisChannelLayer.")
    parser.add_argument("--pg-pool", action="store_true",
                        help="PostgreSQL through psycopg's connection pool (Django's OPTIONS['pool']).")
    parser.add_argument("--web", type=int, default=1,
                        help="daphne processes on the one channel layer; each reconnect goes to the next one.")
    parser.add_argument("--redis-url", default=streaming.REDIS_URL,
                        help="The Redis database of the layer, broker and results (never flushed).")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    if args.web < 1:
        parser.error(f"--web must be 1 or more, not {args.web}")
    streaming.REDIS_URL = args.redis_url  # _configure gives it to every process
    if missing := redis_missing():
        print(missing, file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="robotlab-b6-"))
    os.environ["BENCH_PG_POOL"] = "1" if args.pg_pool else ""
    database = _configure(args.db, args.layer, "wal", args.tokens, args.rate, workdir)
    if not args.json:
        print(f"B6: {args.runs} runs, {args.concurrency} at a time, {args.tokens} tokens at {args.rate:g} tok/s; "
              f"socket dropped every {args.drop_every:g} s for {args.away:g} s, resumed by {args.resume}; "
              f"{args.layer} layer; {args.web} web process{'es' if args.web > 1 else ''}; {database}")
    try:
        result = run(args.runs, args.concurrency, args.tokens, args.drop_every, args.away, args.resume,
                     args.timeout or args.tokens / args.rate + 60, args.layer, workdir, args.web)
    finally:
        from django.db import connections

        connections.close_all()
        if args.db == "postgres":
            _postgres(f"DROP DATABASE IF EXISTS {os.environ['ROBOTLAB_TEST_DATABASE_URL'].rsplit('/', 1)[1]} "
                      "WITH (FORCE)")
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        print(json.dumps({"benchmark": "B6 reconnect", "python": platform.python_version(),
                          "machine": platform.machine(), "cpus": os.cpu_count(), "database": database,
                          "targets": TARGETS, "result": result}, indent=2))
    else:
        _print(result)
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
