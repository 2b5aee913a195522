"""CPU per streamed token: RobotLab's default path, RobotLab forced to litellm, and the same peers as peers.py.

One fake OpenAI-compatible server in a separate process streams a 1000-token reply (one SSE event a token);
each path, in its own child process (``benchmarks/_peers.py``), consumes ``--runs`` such streams after
``--warmup`` and reports its own process CPU time (``time.process_time``) divided by the tokens it received.
RobotLab's paths run a whole robot with an ``on_content`` callback, so the figure includes its chunk events.
``litellm-usage`` is litellm alone asked for usage in the stream (``stream_options``), as RobotLab asks it: the
request forced litellm sends. The last lines give forced litellm's ratio to both.

    .venv/bin/python benchmarks/streaming_cost.py [--runs 20] [--warmup 3]
"""

from __future__ import annotations

import argparse
import os
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
    args = parser.parse_args()
    ensure_peers()
    print(f"load average at start: {os.getloadavg()}")
    print(f"{args.runs} streams of 1000 tokens after {args.warmup} warm-up; client CPU per token")
    costs: dict[str, float] = {}
    with FakeLLMServerProcess(responder=respond) as server:
        for path in args.paths.split(","):
            got = run_child(path, "stream", server.base_url, 0, args.runs, args.warmup)
            if "error" in got:
                print(f"{path:18} error: {got['error'][:100]}")
            else:
                costs[path] = got["us_per_token"]
                print(f"{path:18} {got['us_per_token']:8.1f} us/token  ({got['tokens']} tokens)", flush=True)
    for base in ("litellm", "litellm-usage"):
        if "robotlab-litellm" in costs and base in costs:
            print(f"robotlab-litellm / {base}: {costs['robotlab-litellm'] / costs[base]:.2f}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
