"""benchmarks/admin.py, admin_waterfall.py, import_time.py and sse_parsing.py run standalone (timings are reported,
not asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.robotlab_django.pg import postgres_unreachable

pytestmark = pytest.mark.slow
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_the_admin_benchmark_fills_postgres_and_every_page_makes_few_queries() -> None:
    why = postgres_unreachable({"HOST": "127.0.0.1", "PORT": 5432, "USER": "postgres"})
    if why:
        pytest.skip(why)
    process = subprocess.run([sys.executable, str(BENCHMARKS / "admin.py"), "--runs", "3000", "--repeat", "1",
                              "--refill", "--database", "robotlab_admin_bench_test"],
                             capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout + process.stderr
    rows = re.findall(r"^(\S.*?)\s+(\d+\.\d)\s+(\d+)\s+(\d+)$", process.stdout, re.M)
    assert len(rows) == 11 and all(0 < int(queries) <= 8 for _name, _ms, queries, _kb in rows), process.stdout
    assert re.search(r"^admin: runs=3000 slowest=\S+ \d+ ms max_queries=\d+$", process.stdout, re.M)


def test_the_waterfall_benchmark_draws_every_span_with_few_queries() -> None:
    process = subprocess.run([sys.executable, str(BENCHMARKS / "admin_waterfall.py"), "--repeat", "1", "--others",
                              "2"], capture_output=True, text=True, timeout=600)
    assert process.returncode == 0, process.stdout + process.stderr
    rows = {name: int(queries) for name, queries in
                re.findall(r"^(\S.*?)\s+\d+\.\d\s+(\d+)\s+\d+$", process.stdout, re.M)}
    assert rows.keys() == {"turn page", "task page", "thread page", "waterfall alone"}, process.stdout
    assert rows["waterfall alone"] == 2 and all(0 < queries <= 8 for queries in rows.values()), process.stdout
    assert re.search(r"^admin_waterfall: spans=47 turn_page=\d+ ms queries=\d+ waterfall=\d+\.\d ms$", process.stdout,
                     re.M), process.stdout


def test_the_import_benchmark_prints_both_cases() -> None:
    process = subprocess.run([sys.executable, str(BENCHMARKS / "import_time.py"), "--runs", "2"],
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    assert re.search(r"^import: cached=\d+ source=\d+ \(median of 2\)$", process.stdout, re.M), process.stdout


def test_the_sse_parsing_benchmark_counts_every_token_both_ways() -> None:
    process = subprocess.run([sys.executable, str(BENCHMARKS / "sse_parsing.py"), "--runs", "1", "--rounds", "1"],
                             capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    assert re.search(r"^aiter_lines +\d+\.\d us/token", process.stdout, re.M), process.stdout
    assert re.search(r"^httpx-sse / aiter_lines: \d+\.\d\d$", process.stdout, re.M), process.stdout
