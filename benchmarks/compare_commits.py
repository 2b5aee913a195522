"""B1 and the streaming cost of two checkouts, side by side in one run: this tree against an older commit.

Issue 16 asks that the restructuring leave B1 (the robot's overhead per call) and the streaming cost per token
no worse than before it, measured in one run against the old commit. This script checks the old commit out
into a temporary git worktree and starts ONE fake OpenAI-compatible server in a separate process (so neither
checkout's own fake server, which changed too, is measured). Each checkout then runs the same driver in its own
process with its own code on the path: a robot on the litellm client (``LLMClient``, which both have), with
no tools and with one tool round at 0 ms and 20 ms latency, and a 1,000-token stream with an ``on_content``
callback, through litellm and on the default path (the direct client). The two alternate ``--rounds`` times, so
both see the same machine; it prints the median of each figure for both and their ratio (head / base; below 1 is
faster).

With ``--b2 N`` it runs B2 instead (each checkout's own ``benchmarks/streaming.py --json`` with ``N`` clients of
``--tokens`` tokens at 100 tokens/s: a Celery worker, Redis, daphne, websocket clients), alternating the same way,
and prints the medians of its latencies.

    .venv/bin/python benchmarks/compare_commits.py [--base 8c6dea9] [--rounds 3] [--runs 100]
    .venv/bin/python benchmarks/compare_commits.py --base 6fc4fe6 --b2 10 --tokens 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.peers import respond  # noqa: E402
from robotlab.testing.server import FakeLLMServerProcess  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: Runs under either checkout's code: prints {figure: value} as JSON.
DRIVER = r"""
import asyncio, json, os, statistics, sys, time
import robotlab
from robotlab.llm import LLMClient

URL, RUNS = os.environ["BENCH_URL"], int(os.environ["BENCH_RUNS"])

@robotlab.tool
def lookup(key: str) -> str:
    "Look a key up."
    return f"value of {key}"

async def main():
    client = LLMClient(api_base=URL, api_key="sk-fake")
    plain = robotlab.build(name="plain", model="openai/gpt-4o-mini", llm=client)
    tooled = robotlab.build(name="tooled", model="openai/gpt-4o-mini", llm=client, local_tools=[lookup])
    figures = {}
    for latency in (0, 20):
        for label, robot in (("no tools", plain), ("tool round", tooled)):
            async def once():
                robot.clear_messages()
                await robot.arun(f"Look up the key [latency={latency}]")
            for _ in range(10):
                await once()
            walls, cpu0 = [], time.process_time()
            for _ in range(RUNS):
                start = time.perf_counter()
                await once()
                walls.append((time.perf_counter() - start) * 1e3)
            figures[f"{label}, {latency} ms: wall p50 (ms)"] = statistics.median(walls)
            figures[f"{label}, {latency} ms: cpu per run (ms)"] = (time.process_time() - cpu0) * 1e3 / RUNS
    received = []
    async def stream():
        plain.clear_messages()
        await plain.arun("[stream] tell me a long story", on_content=lambda chunk: received.append(1))
    for _ in range(2):
        await stream()
    received.clear()
    cpu0 = time.process_time()
    for _ in range(max(3, RUNS // 20)):
        await stream()
    figures["stream: cpu per token (us)"] = (time.process_time() - cpu0) * 1e6 / max(1, len(received))
    # the default path: the direct client, as robotlab.configure(llm=...) makes it
    robotlab.configure(llm={"api_base": URL, "api_key": "sk-fake", "max_retries": 0})
    direct = robotlab.build(name="direct", model="openai/gpt-4o-mini")
    async def direct_stream():
        direct.clear_messages()
        await direct.arun("[stream] tell me a long story", on_content=lambda chunk: received.append(1))
    for _ in range(2):
        await direct_stream()
    received.clear()
    cpu0 = time.process_time()
    for _ in range(max(3, RUNS // 20)):
        await direct_stream()
    figures["stream, default path: cpu per token (us)"] = (time.process_time() - cpu0) * 1e6 / max(1, len(received))
    print(json.dumps(figures))

asyncio.run(main())
"""


def _run(checkout: Path, url: str, runs: int) -> dict[str, float]:
    """The driver's figures under ``checkout``'s code."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "BENCH_URL": url,
           "BENCH_RUNS": str(runs)}
    done = subprocess.run([sys.executable, "-c", DRIVER], cwd=checkout, env=env, check=True, capture_output=True,
                          text=True)
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _run_b2(checkout: Path, clients: int, tokens: int) -> dict[str, float]:
    """B2's latencies under ``checkout``'s code and its own benchmark script."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, "benchmarks/streaming.py", "--clients", str(clients), "--tokens",
                           str(tokens), "--json"], cwd=checkout, env=env, check=True, capture_output=True, text=True)
    result = json.loads(done.stdout[done.stdout.index("{"):])["results"][0]
    emit, age = result["emit_latency_ms"], result["token_age_ms"]
    return {"emit->receive p50 (ms)": emit["p50"], "emit->receive p99 (ms)": emit["p99"],
            "emit->receive max (ms)": emit["max"], "token age p50 (ms)": age["p50"],
            "token age p99 (ms)": age["p99"], "tokens per frame": result["tokens_per_frame"],
            "delivered live": result["delivered_live"]}


def main() -> None:
    """Run the driver under both checkouts alternately and print the medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="8c6dea9", help="the commit before the restructuring")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--b2", type=int, default=0, metavar="N", help="run B2 with N clients instead")
    parser.add_argument("--tokens", type=int, default=1000, help="B2's tokens per run")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="robotlab-base-"))
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.base], cwd=ROOT, check=True)
    runs: dict[str, list[dict[str, float]]] = {"base": [], "head": []}
    try:
        if args.b2:
            for index in range(args.rounds):
                order = [("base", base), ("head", ROOT)] if index % 2 == 0 else [("head", ROOT), ("base", base)]
                for name, checkout in order:
                    runs[name].append(_run_b2(checkout, args.b2, args.tokens))
        else:
            with FakeLLMServerProcess(responder=respond) as server:
                url = server.base_url
                for index in range(args.rounds):
                    order = [("base", base), ("head", ROOT)] if index % 2 == 0 else [("head", ROOT), ("base", base)]
                    for name, checkout in order:
                        runs[name].append(_run(checkout, url, args.runs))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    load = os.getloadavg()
    what = (f"B2 with {args.b2} clients of {args.tokens} tokens" if args.b2
            else f"B1 and streaming cost, one fake server process, {args.runs} runs a round")
    print(f"{what}, base {args.base} vs this tree: medians of {args.rounds} alternating rounds "
          f"(load {load[0]:.2f} {load[1]:.2f})")
    print(f"{'figure':40} {'base':>10} {'head':>10} {'head/base':>10}")
    for figure in runs["base"][0]:
        old = statistics.median(r[figure] for r in runs["base"])
        new = statistics.median(r[figure] for r in runs["head"])
        print(f"{figure:40} {old:10.3f} {new:10.3f} {new / old if old else float('nan'):10.3f}")


if __name__ == "__main__":
    main()
