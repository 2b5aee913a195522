"""Issue 14's import figure: ``import robotlab; robotlab.build(...)`` in a fresh process, in milliseconds.

Each sample is a new interpreter that times, from inside, the import and one ``build`` (its own start-up is
left out). Two cases, side by side:

* **bytecode cached**: the modules' ``.pyc`` files exist, as for an installed package or any checkout that
  ran once (they are written to a private ``PYTHONPYCACHEPREFIX`` by a first, uncounted run);
* **no bytecode**: RobotLab's own modules compiled from source on each start (the libraries keep their
  installed ``.pyc`` files), as happens where ``PYTHONDONTWRITEBYTECODE`` is set and the checkout has no
  ``__pycache__`` (this project's sandbox sets it: the figures of earlier sessions included this compile).

The target is under 150 ms. The last line reads ``import: cached=<ms> source=<ms> (median of <n>)``.

    .venv/bin/python benchmarks/import_time.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("import time; t = time.perf_counter(); import robotlab; robotlab.build(name='x', model='gpt-4o-mini'); "
        "print(time.perf_counter() - t)")


def sample(env: dict[str, str]) -> float:
    """One fresh process's import-and-build time in ms."""
    done = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    return float(done.stdout.strip().splitlines()[-1]) * 1000


def main() -> None:
    """Time both cases and print their medians and minimums."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    base = {**os.environ, "PYTHONPATH": str(ROOT)}
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryDirectory() as cache:
        cached = {**base, "PYTHONPYCACHEPREFIX": cache}
        sample(cached)  # writes the .pyc files
        # the tree's own modules compiled each time (the libraries keep their installed .pyc files)
        source = {**base, "PYTHONDONTWRITEBYTECODE": "1"}
        figures: dict[str, list[float]] = {"cached": [], "source": []}
        for _ in range(args.runs):  # alternate, so both see the same machine
            figures["cached"].append(sample(cached))
            figures["source"].append(sample(source))
    for name, values in figures.items():
        print(f"{name:7} median {statistics.median(values):6.1f} ms  min {min(values):6.1f} ms  "
              f"max {max(values):6.1f} ms")
    print(f"import: cached={statistics.median(figures['cached']):.0f} "
          f"source={statistics.median(figures['source']):.0f} (median of {args.runs})")


if __name__ == "__main__":
    main()
