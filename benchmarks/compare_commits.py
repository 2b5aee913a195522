"""B1 and the streaming cost of two checkouts, side by side in one run: this tree against an older commit.

Issue 16 asks that the restructuring leave B1 (``benchmarks/overhead.py``) and the streaming cost per token no
worse than before it, measured in one run against the old commit. This script checks the old commit out into
a temporary git worktree, then runs each checkout's own ``benchmarks/overhead.py`` in its own process with its
own code on the path, alternating the two ``--rounds`` times so that both see the same machine, and prints the
median of each figure for both and their ratio (head / base; below 1 is faster).

    .venv/bin/python benchmarks/compare_commits.py [--base 8c6dea9] [--rounds 3] [--iterations 100]
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: The figures compared: (label, path into overhead.py's JSON results).
FIGURES = [
    ("litellm alone, 0 ms (p50 ms)", ("latency_0ms", "litellm_call", "p50_ms")),
    ("robot no tools, 0 ms (p50 ms)", ("latency_0ms", "robot_no_tools", "p50_ms")),
    ("robot tool round, 0 ms (p50 ms)", ("latency_0ms", "robot_one_tool_round", "p50_ms")),
    ("robot no tools, 0 ms (cpu ms)", ("latency_0ms", "robot_no_tools", "cpu_ms")),
    ("robot no tools, 20 ms (p50 ms)", ("latency_20ms", "robot_no_tools", "p50_ms")),
    ("robot tool round, 20 ms (p50 ms)", ("latency_20ms", "robot_one_tool_round", "p50_ms")),
    ("ratio robot/litellm, 20 ms no tools", ("latency_20ms", "ratio_no_tools")),
    ("ratio robot/litellm, 20 ms tool round", ("latency_20ms", "ratio_tool_round")),
    ("stream: robot cpu per 1,000 tokens (ms)", ("stream_1000_tokens", "robot", "cpu_ms")),
    ("stream: added cpu per token (us)", ("stream_1000_tokens", "added_cpu_us_per_token")),
]


def _run(checkout: Path, iterations: int) -> dict[str, Any]:
    """One run of ``checkout``'s B1 on its own code; its JSON results."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(checkout), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        subprocess.run([sys.executable, str(checkout / "benchmarks" / "overhead.py"), "--iterations",
                        str(iterations), "--json", out.name], cwd=checkout, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        results: dict[str, Any] = json.loads(Path(out.name).read_text())["results"]
        return results


def _pick(results: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = results
    for key in path:
        value = value[key]
    return float(value)


def main() -> None:
    """Run both checkouts' B1 alternately and print the medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="8c6dea9", help="the commit before the restructuring")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="robotlab-base-"))
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(base), args.base], cwd=ROOT, check=True)
    try:
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "head": []}
        for index in range(args.rounds):
            order = [("base", base), ("head", ROOT)] if index % 2 == 0 else [("head", ROOT), ("base", base)]
            for name, checkout in order:
                runs[name].append(_run(checkout, args.iterations))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    load = os.getloadavg()
    print(f"B1 and streaming cost, base {args.base} vs this tree: medians of {args.rounds} alternating runs "
          f"of {args.iterations} iterations (load {load[0]:.2f} {load[1]:.2f})")
    print(f"{'figure':42} {'base':>10} {'head':>10} {'head/base':>10}")
    for label, path in FIGURES:
        old = statistics.median(_pick(r, path) for r in runs["base"])
        new = statistics.median(_pick(r, path) for r in runs["head"])
        ratio = new / old if old else float("nan")
        print(f"{label:42} {old:10.3f} {new:10.3f} {ratio:10.3f}")


if __name__ == "__main__":
    main()
