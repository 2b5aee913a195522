"""RobotLab's default model path against its peers: ms per plain call and per tool round.

One fake OpenAI-compatible server in a separate process (``FakeLLMServerProcess``) answers every path; its
responder reads the latency to add from the prompt (``[latency=20]``). Each path runs in its own child process
(``benchmarks/_peers.py``): the openai SDK alone, litellm alone, pydantic-ai, openai-agents (both installed by
this script with ``pip install --target``, not project dependencies), RobotLab's default (``llm_transport``
``auto``: the direct client for this OpenAI model) and RobotLab forced to litellm. Each does ``--warmup``
calls, then ``--runs`` sequential ones; a tool round is two model calls with two tool calls between them.

    .venv/bin/python benchmarks/peers.py [--runs 100] [--warmup 10] [--latencies 0,20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._peers import PATHS, ensure_peers, run_child  # noqa: E402
from robotlab.testing.server import FakeLLMServerProcess, call, reply, slow_first_byte, tokens, tool_calls  # noqa: E402


def respond(body: dict[str, Any]) -> Any:
    """Tool calls when tools are offered and none ran yet, else text; ``[latency=N]`` delays the first byte."""
    messages = body["messages"]
    users = " ".join(str(m.get("content")) for m in messages if m.get("role") == "user")
    if "[stream]" in users:
        return tokens(1000)
    if body.get("tools") and messages[-1].get("role") != "tool":
        step: Any = tool_calls(call("get_weather", location="Paris"), call("get_time", zone="CET"))
    else:
        step = reply("It is sunny in Paris and noon." if messages[-1].get("role") == "tool" else "ok")
    latency = int(users.split("[latency=", 1)[1].split("]", 1)[0]) if "[latency=" in users else 0
    return slow_first_byte(latency / 1000, step) if latency else step


def summary(values: list[float]) -> str:
    """Median and the 10th-90th percentile range."""
    cuts = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):7.2f} ({cuts[0]:.2f}-{cuts[-1]:.2f})"


def main() -> None:
    """Run every path at every latency and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--latencies", default="0,20")
    parser.add_argument("--paths", default=",".join(PATHS))
    args = parser.parse_args()
    ensure_peers()
    print(f"load average at start: {os.getloadavg()}")
    with FakeLLMServerProcess(responder=respond) as server:
        for latency in (int(x) for x in args.latencies.split(",")):
            print(f"\nlatency {latency} ms, {args.runs} runs after {args.warmup} warm-up, ms: median (p10-p90)")
            print(f"{'path':18} {'plain call':>24} {'tool round':>24}")
            for path in args.paths.split(","):
                cells = []
                for mode in ("plain", "tool"):
                    got = run_child(path, mode, server.base_url, latency, args.runs, args.warmup)
                    cells.append(summary(got["ms"]) if "ms" in got else f"error: {got['error'][:60]}")
                print(f"{path:18} {cells[0]:>24} {cells[1]:>24}", flush=True)
    print(f"\nload average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
