"""SSE parsing for the direct client: httpx's ``aiter_lines`` (what it uses) against ``httpx-sse``'s parser.

Issue 14 allows a maintained SSE parser such as ``httpx-sse`` (installed here through ``mcp``) if it costs no
speed. Both read the same 1000-token stream from one fake OpenAI-compatible server in a child process, over one
pooled ``httpx.AsyncClient``, and ``json.loads`` every event's data, as the direct client does. The two are
timed alternately, ``--rounds`` times, each round ``--runs`` streams after a warm-up; the figure is client CPU
per token (``time.process_time``), the median over the rounds, and the last line is their ratio.

    .venv/bin/python benchmarks/sse_parsing.py [--runs 10] [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable

import httpx
from httpx_sse import EventSource

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from robotlab.testing.server import FakeLLMServerProcess, tokens  # noqa: E402

BODY = {"model": "gpt-4o-mini", "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "a long story"}]}


async def lines(response: httpx.Response) -> int:
    """The direct client's way: ``aiter_lines``, keep ``data:`` lines, stop at ``[DONE]``."""
    count = 0
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            break
        chunk = json.loads(payload)
        count += bool(chunk["choices"] and chunk["choices"][0]["delta"].get("content"))
    return count


async def sse(response: httpx.Response) -> int:
    """``httpx-sse``: ``EventSource(response).aiter_sse()``, then the same per-event work."""
    count = 0
    async for event in EventSource(response).aiter_sse():
        if event.data == "[DONE]":
            break
        chunk = json.loads(event.data)
        count += bool(chunk["choices"] and chunk["choices"][0]["delta"].get("content"))
    return count


async def cpu_per_token(client: httpx.AsyncClient, url: str, parse: Callable[[httpx.Response], Awaitable[int]],
                        runs: int) -> float:
    """Client CPU microseconds per token over ``runs`` streams parsed by ``parse``."""
    start, seen = time.process_time(), 0
    for _ in range(runs):
        async with client.stream("POST", url, json=BODY) as response:
            seen += await parse(response)
    return (time.process_time() - start) / max(seen, 1) * 1e6


async def main(runs: int, rounds: int) -> None:
    """Time both parsers alternately and print the medians and their ratio."""
    with FakeLLMServerProcess(default=tokens(1000)) as server:
        url = f"{server.base_url}/chat/completions"
        async with httpx.AsyncClient() as client:
            for parse in (lines, sse):
                await cpu_per_token(client, url, parse, 2)  # warm-up
            seen: dict[str, list[float]] = {"aiter_lines": [], "httpx-sse": []}
            for index in range(rounds):
                order = [("aiter_lines", lines), ("httpx-sse", sse)]
                for name, parse in order if index % 2 == 0 else order[::-1]:
                    seen[name].append(await cpu_per_token(client, url, parse, runs))
    print(f"{rounds} rounds of {runs} streams of 1000 tokens; client CPU per token, median (min-max)")
    medians = {name: statistics.median(values) for name, values in seen.items()}
    for name, values in seen.items():
        print(f"{name:12} {medians[name]:6.1f} us/token  ({min(values):.1f}-{max(values):.1f})")
    print(f"httpx-sse / aiter_lines: {medians['httpx-sse'] / medians['aiter_lines']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.runs, args.rounds))
