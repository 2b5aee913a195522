"""How far concurrent work passes a budget: the overshoot of 16 concurrent runs and of an 8-branch network turn.

Both run on the real stack (tests/robotlab_django/budget_workers.py): a fresh PostgreSQL database, the shared
Redis as the broker, two Celery worker nodes, and a fake OpenAI-compatible server that counts every request, so
"paid" is what the model was asked for.

* ``runs``: 16 runs of one user at once on two nodes (8 pool children each); each model call uses 5,000 tokens
  and reserves its prompt plus ``RESERVE_TOKENS`` (4,000) against ``USER_TOKENS`` 10,000. The bound
  (docs/django/budgets.md): the calls that fit at once (10,000 // 4,000) times each one's excess (1,000).
* ``network``: one ``fanout`` turn (plan -> 8 branches -> reduce) with ``token_budget`` 300 on two nodes (4
  children each); each call uses 80 tokens, its robots set ``max_tokens`` 50. The bound: one call (80).

For each it prints the limit, what the ledger consumed, the overshoot and its bound, and whether every paid
token is on a row (and, for the turn, in the usage rollups).

    .venv/bin/python benchmarks/budgets.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure() -> dict[str, dict[str, Any]]:
    """Run both scenarios; their figures."""
    from tests.robotlab_django import budget_workers

    with tempfile.TemporaryDirectory() as runs_dir, tempfile.TemporaryDirectory() as turn_dir:
        runs = budget_workers.run(Path(runs_dir), "concurrent", "--runs", "16", "--limit", "10000",
                                  "--call-tokens", "5000", "--reserve-tokens", "4000", "--concurrency", "8")
        turn = budget_workers.run(Path(turn_dir), "network", "--branches", "8", "--budget", "300",
                                  "--call-tokens", "80", "--max-tokens", "50", "--concurrency", "4")
    return {
        "runs": {"limit": runs["limit"], "consumed": runs["consumed"], "overshoot": max(0, runs["consumed"] - 10_000),
                 "bound": (10_000 // 4_000) * (5_000 - 4_000), "requests": runs["requests"],
                 "paid_tokens": runs["paid_tokens"], "row_tokens": runs["row_tokens"], "reserved": runs["reserved"],
                 "statuses": runs["statuses"], "seconds": runs["seconds"]},
        "network": {"limit": turn["budget"], "consumed": turn["consumed"], "overshoot": max(0, turn["consumed"] - 300),
                    "bound": 80, "requests": turn["requests"], "paid_tokens": turn["paid_tokens"],
                    "row_tokens": turn["row_tokens"], "rollup_tokens": turn["rollup_tokens"],
                    "reserved": turn["reserved"], "status": turn["status"]},
    }


def main() -> None:
    """Print the overshoot of each scenario against its bound."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of lines")
    args = parser.parse_args()
    figures = measure()
    if args.json:
        print(json.dumps(figures))
        return
    for name, what in (("runs", "16 concurrent runs, 2 nodes"), ("network", "8-branch network turn, 2 nodes")):
        row = figures[name]
        recorded = row["paid_tokens"] == row["row_tokens"] == row.get("rollup_tokens", row["row_tokens"])
        print(f"{what}: limit {row['limit']}, consumed {row['consumed']}, overshoot {row['overshoot']} "
              f"(bound {row['bound']}: {'within' if row['overshoot'] <= row['bound'] else 'PAST'}), "
              f"{row['requests']} model calls, every paid token on a row: {'yes' if recorded else 'NO'}, "
              f"reserved after: {row['reserved']}")


if __name__ == "__main__":
    main()
