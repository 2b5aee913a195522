"""B1: framework overhead of ``robot.arun`` over ``litellm.acompletion``, against the fake server.

Prints per-call times (p50 and mean, wall and CPU) of litellm alone and of the robot, with no
tools and with one tool round (two LLM calls), at 0 ms and 20 ms server latency, and the
per-token cost of streaming 1,000 tokens. Targets (issue 2): at 20 ms the robot/litellm ratio
is at most 1.05; at 0 ms the robot adds at most 1 ms a call; streaming adds at most 50 us a token.

    .venv/bin/python benchmarks/overhead.py [--iterations 200] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import robotlab  # noqa: E402
from robotlab.llm import LLMClient, load_litellm  # noqa: E402
from robotlab.testing.server import FakeLLMServer, call, reply, tokens, tool_calls  # noqa: E402

MODEL = "openai/gpt-4o-mini"
MESSAGES = [{"role": "user", "content": "Say hello"}]


@robotlab.tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _summary(walls: list[float], cpu: float) -> dict[str, float]:
    walls = sorted(walls)
    return {
        "p50_ms": walls[len(walls) // 2] * 1e3,
        "p99_ms": walls[max(0, int(len(walls) * 0.99) - 1)] * 1e3,
        "mean_ms": statistics.fmean(walls) * 1e3,
        "cpu_ms": cpu * 1e3,
    }


async def measure_pair(
    first: Callable[[], Awaitable[Any]], second: Callable[[], Awaitable[Any]], iterations: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Wall and CPU time per call of two functions, interleaved call by call so drift cancels out."""
    for _ in range(max(5, iterations // 10)):
        await first()
        await second()
    walls: tuple[list[float], list[float]] = ([], [])
    cpus = [0.0, 0.0]
    for _ in range(iterations):
        for index, fn in enumerate((first, second)):
            cpu = time.process_time()
            start = time.perf_counter()
            await fn()
            walls[index].append(time.perf_counter() - start)
            cpus[index] += time.process_time() - cpu
    return _summary(walls[0], cpus[0] / iterations), _summary(walls[1], cpus[1] / iterations)


async def bench(iterations: int) -> dict[str, Any]:
    litellm = load_litellm()
    results: dict[str, Any] = {}
    with FakeLLMServer() as server:
        kwargs = {"model": MODEL, "api_base": server.base_url, "api_key": "sk-fake", "max_retries": 0}
        client = LLMClient(api_base=server.base_url, api_key="sk-fake")
        plain = robotlab.build(name="plain", model=MODEL, llm=client)
        tooled = robotlab.build(name="tooled", model=MODEL, llm=client, local_tools=[lookup])

        async def raw_call() -> None:
            await litellm.acompletion(messages=MESSAGES, **kwargs)

        async def raw_two_calls() -> None:
            await litellm.acompletion(messages=MESSAGES, **kwargs)
            await litellm.acompletion(messages=MESSAGES, **kwargs)

        async def robot_call() -> None:
            plain.clear_messages()
            await plain.arun("Say hello")

        def tool_round(body: dict[str, Any]) -> Any:
            last = body["messages"][-1]
            if body.get("tools") and last["role"] == "user":
                return tool_calls(call("lookup", key="a"))
            return reply("Hello!")

        async def robot_tool_round() -> None:
            tooled.clear_messages()
            await tooled.arun("Look up a")

        for latency in (0.0, 0.02):
            server.latency = latency
            server.responder = None
            server.default = reply("Hello!")
            n = iterations if latency == 0 else max(20, iterations // 4)
            litellm_one, robot_one = await measure_pair(raw_call, robot_call, n)
            server.responder = tool_round
            litellm_two, robot_two = await measure_pair(raw_two_calls, robot_tool_round, n)
            key = f"latency_{int(latency * 1000)}ms"
            results[key] = {
                "litellm_call": litellm_one,
                "robot_no_tools": robot_one,
                "litellm_two_calls": litellm_two,
                "robot_one_tool_round": robot_two,
                "ratio_no_tools": robot_one["p50_ms"] / litellm_one["p50_ms"],
                "ratio_tool_round": robot_two["p50_ms"] / litellm_two["p50_ms"],
                "added_ms_per_call_no_tools": robot_one["p50_ms"] - litellm_one["p50_ms"],
                "added_ms_per_call_tool_round": (robot_two["p50_ms"] - litellm_two["p50_ms"]) / 2,
            }

        server.latency = 0.0
        server.responder = None
        server.default = tokens(1000)
        stream_iterations = max(5, iterations // 20)

        async def raw_stream() -> None:
            stream = await litellm.acompletion(
                messages=MESSAGES, stream=True, stream_options={"include_usage": True}, **kwargs
            )
            async for _chunk in stream:
                pass

        received: list[int] = []

        async def robot_stream() -> None:
            plain.clear_messages()
            await plain.arun("Stream", on_content=lambda chunk: received.append(1))

        litellm_stream, robot_streamed = await measure_pair(raw_stream, robot_stream, stream_iterations)
        results["stream_1000_tokens"] = {
            "litellm": litellm_stream,
            "robot": robot_streamed,
            "added_us_per_token": (robot_streamed["p50_ms"] - litellm_stream["p50_ms"]) * 1e3 / 1000,
            "added_cpu_us_per_token": (robot_streamed["cpu_ms"] - litellm_stream["cpu_ms"]) * 1e3 / 1000,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    results = asyncio.run(bench(args.iterations))
    litellm = load_litellm()
    meta = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "litellm": getattr(litellm, "__version__", None) or _version("litellm"),
    }
    print(f"B1 overhead  ({meta})")
    for latency in ("latency_0ms", "latency_20ms"):
        row = results[latency]
        print(f"\n{latency}:")
        for name in ("litellm_call", "robot_no_tools", "litellm_two_calls", "robot_one_tool_round"):
            m = row[name]
            print(f"  {name:22} p50 {m['p50_ms']:8.3f} ms  p99 {m['p99_ms']:8.3f} ms  cpu {m['cpu_ms']:7.3f} ms")
        print(
            f"  ratio robot/litellm: no tools {row['ratio_no_tools']:.3f}, one tool round {row['ratio_tool_round']:.3f}"
        )
        print(
            f"  added per LLM call: no tools {row['added_ms_per_call_no_tools']:+.3f} ms, "
            f"tool round {row['added_ms_per_call_tool_round']:+.3f} ms"
        )
    s = results["stream_1000_tokens"]
    print("\nstream 1,000 tokens:")
    print(f"  litellm p50 {s['litellm']['p50_ms']:.1f} ms, robot p50 {s['robot']['p50_ms']:.1f} ms")
    print(f"  added per token: {s['added_us_per_token']:+.1f} us wall, {s['added_cpu_us_per_token']:+.1f} us cpu")
    r20 = results["latency_20ms"]
    r0 = results["latency_0ms"]
    print("\ntargets:")
    print(f"  20 ms ratio <= 1.05: {max(r20['ratio_no_tools'], r20['ratio_tool_round']):.3f}")
    print(f"  0 ms added <= 1 ms/call: {max(r0['added_ms_per_call_no_tools'], r0['added_ms_per_call_tool_round']):.3f}")
    print(f"  streaming <= 50 us/token: {s['added_us_per_token']:.1f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "results": results}, handle, indent=2)


def _version(name: str) -> str | None:
    from importlib.metadata import version

    try:
        return version(name)
    except Exception:
        return None


if __name__ == "__main__":
    main()
