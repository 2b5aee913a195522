"""benchmarks/streaming.py runs end to end (worker, Redis, daphne, websockets) and loses no token."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_streaming_benchmark_delivers_every_token_coalesced() -> None:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=3).close()
    except OSError as exc:
        pytest.skip(f"Redis at 127.0.0.1:6379 cannot be reached: {exc}")
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "streaming.py"
    options = ["--clients", "2", "--tokens", "60", "--rate", "300", "--timeout", "60", "--json"]
    process = subprocess.run([sys.executable, str(script), *options], capture_output=True, text=True,
                             timeout=300)
    assert process.returncode == 0, process.stderr
    result = json.loads(process.stdout)["results"][0]
    assert result["produced"] == 120 and result["delivered_after_replay"] == 1.0 and result["replayed_text_exact"]
    assert result["delivered_live"] == 1.0 and result["live_text_exact"]  # nothing is dropped at this load
    assert result["streams_ended"] == 2
    assert result["tokens_per_frame"] > 1 and result["emit_latency_ms"]["p50"] > 0
    assert result["token_age_ms"]["p50"] > result["emit_latency_ms"]["p50"]  # the coalescing wait is in it
