"""CPU per streamed token: RobotLab's default path, RobotLab forced to litellm, and the same peers as peers.py.

One fake OpenAI-compatible server in a separate process streams a 1000-token reply (one SSE event a token);
each path, in its own child process (``benchmarks/_peers.py``), consumes ``--runs`` such streams after
``--warmup`` and reports its own process CPU time (``time.process_time``) divided by the tokens it received.
RobotLab's paths run a whole robot with an ``on_content`` callback, so the figure includes its chunk events.
``litellm-usage`` is litellm alone asked for usage in the stream (``stream_options``), as RobotLab asks it: the
request forced litellm sends. The last lines give forced litellm's ratio to both.

One child's figure moves by 10 to 30 % from one child to the next on this 2-core machine (the same calls, counted
by a profiler, in each), so ``--rounds`` runs every path that many times, in a rotated order each round, and the
figures and ratios are the medians over the rounds (each round's figures are printed too).

    .venv/bin/python benchmarks/streaming_cost.py [--runs 20] [--warmup 3] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._peers import PATHS, ensure_peers, run_child  # noqa: E402
from benchmarks.peers import respond  # noqa: E402
from robotlab.testing.server import FakeLLMServerProcess  # noqa: E402


def main() -> None:
    """Measure every path and print us of CPU per token."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--paths", default=",".join((*PATHS[:2], "litellm-usage", *PATHS[2:])))
    parser.add_argument("--rounds", type=int, default=1, help="Run every path this many times (medians).")
    args = parser.parse_args()
    ensure_peers()
    print(f"load average at start: {os.getloadavg()}")
    print(f"{args.runs} streams of 1000 tokens after {args.warmup} warm-up; client CPU per token")
    paths = args.paths.split(",")
    seen: dict[str, list[float]] = {path: [] for path in paths}
    with FakeLLMServerProcess(responder=respond) as server:
        for round_ in range(args.rounds):
            for path in paths[round_ % len(paths):] + paths[: round_ % len(paths)]:
                got = run_child(path, "stream", server.base_url, 0, args.runs, args.warmup)
                if "error" in got:
                    print(f"{path:18} error: {got['error'][:100]}")
                else:
                    seen[path].append(got["us_per_token"])
                    print(f"{path:18} {got['us_per_token']:8.1f} us/token  ({got['tokens']} tokens)", flush=True)
    costs = {path: statistics.median(values) for path, values in seen.items() if values}
    if args.rounds > 1:
        print(f"medians over {args.rounds} rounds:")
        for path, cost in costs.items():
            print(f"{path:18} {cost:8.1f} us/token  (min {min(seen[path]):.1f}, max {max(seen[path]):.1f})")
    for base in ("litellm", "litellm-usage"):
        if "robotlab-litellm" in costs and base in costs:
            print(f"robotlab-litellm / {base}: {costs['robotlab-litellm'] / costs[base]:.2f}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
