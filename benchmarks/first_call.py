"""Issue 31's first-call figure: a fresh process's first ``robot.run()`` against its second, in milliseconds.

Each sample is a new interpreter that imports robotlab, builds a robot of an OpenAI-compatible model
(``openai/gpt-4o-mini``, ``api_base`` set to a fake OpenAI-compatible server run in its own process, 0 ms
latency) and times, from inside, its first and its second ``run``. What the first run loads (the background
loop, httpx's connection pool) counts in the first; the second is the steady cost; ``import robotlab`` with the
``build`` is timed apart, and it holds what ``build`` prepares for a direct model's first call (the run loop's and
httpx's modules, the price table, the SSL context: :func:`robotlab.llm.warmup.prepare`), so the ``to answer``
column (import, build and first run) is what a script waits for its first answer. The child also reports whether
``litellm`` is in ``sys.modules`` afterwards.

The target is first <= second + 100 ms (medians of 10 fresh processes), with litellm never imported.
``--compare`` adds the same runs with ``llm_transport="litellm"`` (what the first call costs once litellm
loads: the direct client's first call before issue 31 priced through litellm and paid about the same).
The last line reads ``first_call: first=<ms> second=<ms> added=<ms> litellm=<n>/<runs> (median of <n>)``.

    .venv/bin/python benchmarks/first_call.py [--runs 10] [--compare] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from robotlab.testing.server import FakeLLMServerProcess  # noqa: E402 (after the path is set)

CHILD = """
import time
began = time.perf_counter()
import json, sys
import robotlab
robotlab.configure(llm={{"api_base": {base!r}, "api_key": "sk-fake"}}, llm_transport={transport!r})
robot = robotlab.build(name="first", model="openai/gpt-4o-mini")
start = time.perf_counter()
first = robot.run("Hi")
middle = time.perf_counter()
robot.run("Again")
end = time.perf_counter()
print(json.dumps({{"import": (start - began) * 1000, "first": (middle - start) * 1000, "second": (end - middle) * 1000,
                  "litellm": "litellm" in sys.modules, "transport": first.transport, "cost": first.cost}}))
"""


def sample(base: str, transport: str) -> dict[str, Any]:
    """One fresh process's first and second run."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD.format(base=base, transport=transport)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=300)
    if done.returncode:
        raise RuntimeError(f"the child failed:\n{done.stderr[-3000:]}")
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def summary(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians, extremes and the litellm count of one case."""
    first = [s["first"] for s in samples]
    second = [s["second"] for s in samples]
    return {"import_build_ms": statistics.median(s["import"] for s in samples),
            "to_answer_ms": statistics.median(s["import"] + s["first"] for s in samples),
            "first_ms": statistics.median(first), "second_ms": statistics.median(second),
            "first_max_ms": max(first), "added_ms": statistics.median(first) - statistics.median(second),
            "ratio": statistics.median(first) / statistics.median(second),
            "litellm_imported": sum(s["litellm"] for s in samples), "runs": len(samples),
            "transport": samples[0]["transport"], "cost": samples[0]["cost"]}


def main() -> None:
    """Time the cases and print their medians side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compare", action="store_true", help="also time llm_transport='litellm'")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    cases = {"auto (direct)": "auto", **({"litellm": "litellm"} if args.compare else {})}
    figures: dict[str, list[dict[str, Any]]] = {name: [] for name in cases}
    with FakeLLMServerProcess(default="Hello there") as server:
        sample(server.base_url, "auto")  # writes the .pyc files: not counted
        for _ in range(args.runs):  # alternate, so every case sees the same machine
            for name, transport in cases.items():
                figures[name].append(sample(server.base_url, transport))
    results = {name: summary(samples) for name, samples in figures.items()}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"first call, {args.runs} fresh processes (medians, ms), {os.cpu_count()} cores")
    print(f"  {'case':14} {'import+build':>12} {'first':>9} {'second':>8} {'added':>9} {'first/second':>13} "
          f"{'max first':>10} {'to answer':>10}  litellm")
    for name, r in results.items():
        print(f"  {name:14} {r['import_build_ms']:12.1f} {r['first_ms']:9.1f} {r['second_ms']:8.1f} "
              f"{r['added_ms']:9.1f} {r['ratio']:13.1f} {r['first_max_ms']:10.1f} {r['to_answer_ms']:10.1f}  "
              f"{r['litellm_imported']}/{r['runs']} imported it")
    if "litellm" in results:
        print(f"  litellm's first run / direct's first run: "
              f"{results['litellm']['first_ms'] / results['auto (direct)']['first_ms']:.1f}x")
    r = results["auto (direct)"]
    print(f"target: first <= second + 100 ms: {'met' if r['added_ms'] <= 100 else 'missed'}; "
          f"litellm imported in {r['litellm_imported']} of {r['runs']}")
    print(f"first_call: first={r['first_ms']:.0f} second={r['second_ms']:.0f} added={r['added_ms']:.0f} "
          f"litellm={r['litellm_imported']}/{r['runs']} (median of {r['runs']})")


if __name__ == "__main__":
    main()
