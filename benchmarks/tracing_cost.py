"""What OpenTelemetry instrumentation costs: RobotLab's default path with tracing off, with the API only, with an SDK.

Four paths of ``benchmarks/_peers.py``, each in its own child process against one fake OpenAI-compatible server in
another: ``robotlab-off`` (``instrument=False``), ``robotlab`` (instrumented, ``opentelemetry-api`` only: what a
project without an SDK runs), ``robotlab-sdk`` (an SDK tracer provider with a ``BatchSpanProcessor`` to an
exporter that drops the spans) and ``robotlab-sdk-metrics`` (an SDK meter provider as well). For each: the client
CPU per streamed token (a 1000-token reply streamed to ``on_content``) and the client CPU of a tool round (two model
calls, two tool calls; five spans when traced). Child figures move from one child to the next on a busy machine, so
every path runs ``--rounds`` times in a rotated order and the medians are printed, with each path's ratio to
``robotlab-off``.
Then the steadiest figure: in one child per instrumented path, tool rounds with instrumentation off, on, and on
the SDK's floor (``_sdk_floor``: the same spans, attributes and measurements made with the bare SDK, nothing of
RobotLab's around them) in rotated batches, so all three see the same load; ``ours`` is on minus floor, what
RobotLab's own code adds to the SDK's cost. Last, the five spans of a tool round alone, with no network, model or
tools: off, ``robotlab.telemetry`` and the floor, and the SDK's share of the cost.

Targets (issue 28, item 2): off and API only, the streamed token stays <= 12 us and the tool round within noise;
with the SDK a tool round costs at most 10 % more CPU.

    .venv/bin/python benchmarks/tracing_cost.py [--runs 100] [--stream-runs 10] [--rounds 5] [--ab-runs 500]
        [--spans-runs 1000] [--spans-rounds 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._peers import TRACING_PATHS, run_child  # noqa: E402
from benchmarks.peers import respond  # noqa: E402
from robotlab.testing.server import FakeLLMServerProcess  # noqa: E402


def main() -> None:
    """Measure the three paths and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100, help="Tool rounds per child.")
    parser.add_argument("--stream-runs", type=int, default=10, help="1000-token streams per child.")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5, help="Run every path this many times (medians).")
    parser.add_argument("--ab-runs", type=int, default=500, help="Tool rounds each way in the alternating test.")
    parser.add_argument("--spans-runs", type=int, default=1000, help="Tool rounds' spans per batch, no network.")
    parser.add_argument("--spans-rounds", type=int, default=15, help="Batches of each arm, no network.")
    args = parser.parse_args()
    paths = list(TRACING_PATHS)
    print(f"load average at start: {os.getloadavg()}")
    token: dict[str, list[float]] = {path: [] for path in paths}
    tool: dict[str, list[float]] = {path: [] for path in paths}
    with FakeLLMServerProcess(responder=respond) as server:
        for round_ in range(args.rounds):
            for path in paths[round_ % len(paths):] + paths[: round_ % len(paths)]:
                streamed = run_child(path, "stream", server.base_url, 0, args.stream_runs, args.warmup)
                rounds = run_child(path, "tool", server.base_url, 0, args.runs, args.warmup)
                for got in (streamed, rounds):
                    if "error" in got:
                        sys.exit(f"{path}: {got['error']}")
                token[path].append(streamed["us_per_token"])
                tool[path].append(statistics.median(rounds["cpu_ms"]))
                print(f"round {round_ + 1} {path:20} {token[path][-1]:7.2f} us/token  "
                      f"{tool[path][-1]:7.3f} ms CPU/tool round", flush=True)
    print(f"\nmedians over {args.rounds} rounds (per child: {args.stream_runs} streams of 1000 tokens, "
          f"median of {args.runs} tool rounds)")
    print(f"{'path':20} {'us/token':>9} {'x off':>6} {'CPU ms/tool round':>18} {'x off':>6}")
    base_token, base_tool = statistics.median(token["robotlab-off"]), statistics.median(tool["robotlab-off"])
    for path in paths:
        per_token, per_round = statistics.median(token[path]), statistics.median(tool[path])
        print(f"{path:20} {per_token:9.2f} {per_token / base_token:6.3f} "
              f"{per_round:18.3f} {per_round / base_tool:6.3f}")
    print(f"spread of robotlab-off's tool round over the rounds: {min(tool['robotlab-off']):.3f}-"
          f"{max(tool['robotlab-off']):.3f} ms")
    print("\nin one process, tool rounds with instrumentation off, on, and on the SDK's floor (the same spans made "
          f"with the bare SDK) in rotated batches of 10 ({args.ab_runs} each way; medians of the batches' CPU ms "
          "per tool round)")
    print(f"{'path':20} {'off':>8} {'on':>8} {'floor':>8} {'on / off':>9} {'floor / off':>12} {'ours':>8}")
    with FakeLLMServerProcess(responder=respond) as server:
        for path in TRACING_PATHS[1:]:
            got = run_child(path, "tool-ab", server.base_url, 0, args.ab_runs, args.warmup)
            if "error" in got:
                sys.exit(f"{path}: {got['error']}")
            off, on = statistics.median(got["off_cpu_ms"]), statistics.median(got["on_cpu_ms"])
            if "floor_cpu_ms" not in got:
                print(f"{path:20} {off:8.3f} {on:8.3f} {'':>8} {on / off:9.3f}", flush=True)
                continue
            floor = statistics.median(got["floor_cpu_ms"])
            print(f"{path:20} {off:8.3f} {on:8.3f} {floor:8.3f} {on / off:9.3f} {floor / off:12.3f} "
                  f"{(on - floor) * 1000:+6.0f}us", flush=True)
        print("\nthe five spans of a tool round alone, no network (CPU us per tool round's telemetry calls; medians of "
              f"{args.spans_rounds} rotated batches of {args.spans_runs})")
        print(f"{'path':20} {'off':>8} {'robotlab':>9} {'SDK floor':>10} {'ours':>8} {'SDK share':>10}")
        for path in TRACING_PATHS[2:]:
            got = run_child(path, "spans", server.base_url, 0, args.spans_runs, 0)
            if "error" in got:
                sys.exit(f"{path}: {got['error']}")
            ours, floor = got["robotlab"] - got["floor"], got["floor"] - got["off"]
            print(f"{path:20} {got['off']:8.1f} {got['robotlab']:9.1f} {got['floor']:10.1f} {ours:+8.1f} "
                  f"{floor / (got['robotlab'] - got['off']):10.0%}", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
