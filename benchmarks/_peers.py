"""The paths ``peers.py`` and ``streaming_cost.py`` compare, each run in its own child process.

A child imports only its own path (``python benchmarks/_peers.py PATH MODE BASE_URL ...``) and prints one JSON
line. The peer frameworks (pydantic-ai, openai-agents) are not project dependencies: :func:`ensure_peers`
installs them with ``pip install --target`` into a directory put first on the child's ``PYTHONPATH``.

Modes: ``plain`` (one call, wall and CPU ms each), ``tool`` (a tool round: the model asks for two tools, they run,
the model answers: two calls; wall and CPU ms each), ``stream`` (CPU seconds per streamed token over a long reply)
and, for RobotLab's paths, ``tool-ab`` (tool rounds with instrumentation off, on, and on the bare SDK's floor in
rotated batches) and ``spans`` (a tool round's telemetry calls alone, no network: ``_sdk_floor.spans_alone``).

Besides the peers, RobotLab's default path runs with OpenTelemetry instrumentation off (``robotlab-off``), with the
API only and no SDK (``robotlab``, as a project without OpenTelemetry runs it), with an SDK tracer provider
behind a batch span processor (``robotlab-sdk``) and with an SDK meter provider as well (``robotlab-sdk-metrics``):
``tracing_cost.py`` compares them.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PEERS_DIR = os.environ.get("ROBOTLAB_BENCH_PEERS", "/tmp/robotlab-bench-peers")
PEER_PACKAGES = ("pydantic-ai-slim[openai]", "openai-agents")
PATHS = ("openai", "litellm", "pydantic-ai", "openai-agents", "robotlab", "robotlab-litellm")
#: RobotLab's default path by tracing: instrumentation off, on with the API only (``robotlab``), on with an SDK
#: tracer provider and a batch span processor, and with an SDK meter provider too.
TRACING_PATHS = ("robotlab-off", "robotlab", "robotlab-sdk", "robotlab-sdk-metrics")
MODEL = "gpt-4o-mini"


def ensure_peers() -> None:
    """Install the peer frameworks into :data:`PEERS_DIR` unless they are there already."""
    if os.path.isdir(os.path.join(PEERS_DIR, "pydantic_ai")) and os.path.isdir(os.path.join(PEERS_DIR, "agents")):
        return
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", PEERS_DIR, *PEER_PACKAGES],
                   check=True)


def run_child(path: str, mode: str, base_url: str, latency_ms: int, runs: int, warmup: int) -> dict[str, Any]:
    """Run one path in a child process and return what it measured."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    paths = [ROOT]
    if path in ("pydantic-ai", "openai-agents"):
        paths.insert(0, PEERS_DIR)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    out = subprocess.run([sys.executable, __file__, path, mode, base_url, str(latency_ms), str(runs), str(warmup)],
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def prompt(latency_ms: int) -> str:
    """The user message: the fake server's responder reads the latency from it."""
    return f"[latency={latency_ms}] What is the weather and the time in Paris?"


def get_weather(location: str) -> str:
    """Current weather for a location."""
    return f"sunny in {location}"


def get_time(zone: str) -> str:
    """Current time in a zone."""
    return f"12:00 {zone}"


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather for a location.",
                                      "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                                                     "required": ["location"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a zone.",
                                      "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                                                     "required": ["zone"]}}},
]
FUNCTIONS: dict[str, Callable[..., str]] = {"get_weather": get_weather, "get_time": get_time}


def _raw_client(path: str, base_url: str) -> tuple[Callable[..., Awaitable[Any]], Callable[..., Awaitable[int]]]:
    """``(call(messages, tools) -> message, stream(messages) -> tokens)`` for the openai SDK or litellm alone."""
    if path == "openai":
        from openai import AsyncOpenAI

        client = AsyncOpenAI(base_url=base_url, api_key="sk-fake", max_retries=0)

        async def create(**kwargs: Any) -> Any:
            return await client.chat.completions.create(model=MODEL, **kwargs)
    else:
        import litellm

        usage = {"stream_options": {"include_usage": True}} if path == "litellm-usage" else {}

        async def create(**kwargs: Any) -> Any:
            extra = usage if kwargs.get("stream") else {}  # what RobotLab asks for: token counts in the stream
            return await litellm.acompletion(model=f"openai/{MODEL}", api_base=base_url, api_key="sk-fake", **kwargs,
                                             **extra)

    async def call(messages: list[dict[str, Any]], tools: list[Any] | None = None) -> Any:
        response = await create(messages=messages, **({"tools": tools} if tools else {}))
        return response.choices[0].message

    async def stream(messages: list[dict[str, Any]]) -> int:
        count = 0
        async for chunk in await create(messages=messages, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                count += 1
        return count

    return call, stream


def make_path(path: str, base_url: str) -> dict[str, Callable[[str], Awaitable[Any]]]:
    """The ``plain``, ``tool`` and ``stream`` coroutines of ``path`` (``stream`` returns the tokens seen)."""
    if path in ("openai", "litellm", "litellm-usage"):
        call, stream = _raw_client(path, base_url)

        async def plain(text: str) -> Any:
            return await call([{"role": "user", "content": text}])

        async def tool(text: str) -> Any:
            messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
            message = await call(messages, TOOLS)
            calls = message.tool_calls or []
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.function.name,
                                                              "arguments": c.function.arguments}} for c in calls]})
            for c in calls:
                result = FUNCTIONS[c.function.name](**json.loads(c.function.arguments))
                messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
            return await call(messages, TOOLS)

        async def streamed(text: str) -> int:
            return await stream([{"role": "user", "content": text}])

        return {"plain": plain, "tool": tool, "stream": streamed}
    if path == "pydantic-ai":
        from pydantic_ai import Agent
        from pydantic_ai.providers.openai import OpenAIProvider

        try:
            from pydantic_ai.models.openai import OpenAIChatModel as ChatModel
        except ImportError:
            from pydantic_ai.models.openai import OpenAIModel as ChatModel  # type: ignore[no-redef]
        model = ChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="sk-fake"))
        bare = Agent(model)
        tooled = Agent(model, tools=[get_weather, get_time])

        async def p_plain(text: str) -> Any:
            return await bare.run(text)

        async def p_tool(text: str) -> Any:
            return await tooled.run(text)

        async def p_stream(text: str) -> int:
            count = 0
            async with bare.run_stream(text) as result:
                async for _ in result.stream_text(delta=True, debounce_by=None):
                    count += 1
            return count

        return {"plain": p_plain, "tool": p_tool, "stream": p_stream}
    if path == "openai-agents":
        from agents import Agent as OAgent
        from agents import OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
        from openai import AsyncOpenAI

        set_tracing_disabled(True)
        chat = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=base_url, api_key="sk-fake",
                                                                                  max_retries=0))
        o_bare = OAgent(name="a", model=chat)
        o_tooled = OAgent(name="a", model=chat, tools=[function_tool(get_weather), function_tool(get_time)])

        async def o_plain(text: str) -> Any:
            return await Runner.run(o_bare, text)

        async def o_tool(text: str) -> Any:
            return await Runner.run(o_tooled, text)

        async def o_stream(text: str) -> int:
            count = 0
            result = Runner.run_streamed(o_bare, text)
            async for event in result.stream_events():
                kind = getattr(event.data, "type", "") if event.type == "raw_response_event" else ""
                if kind == "response.output_text.delta":
                    count += 1
            return count

        return {"plain": o_plain, "tool": o_tool, "stream": o_stream}
    import robotlab

    robotlab.configure(llm={"api_base": base_url, "api_key": "sk-fake", "max_retries": 0},
                       llm_transport="litellm" if path == "robotlab-litellm" else "auto",
                       instrument=path != "robotlab-off")
    if path.startswith("robotlab-sdk"):
        install_sdk(metrics=path == "robotlab-sdk-metrics")

    async def r_plain(text: str) -> Any:
        return await robotlab.build(name="bench", model=f"openai/{MODEL}").arun(text)

    async def r_tool(text: str) -> Any:
        return await robotlab.build(name="bench", model=f"openai/{MODEL}",
                                    local_tools=[get_weather, get_time]).arun(text)

    async def r_stream(text: str) -> int:
        pieces: list[Any] = []
        await robotlab.build(name="bench", model=f"openai/{MODEL}", on_content=pieces.append).arun(text)
        return len(pieces)

    return {"plain": r_plain, "tool": r_tool, "stream": r_stream}


def install_sdk(*, metrics: bool = False) -> None:
    """An OpenTelemetry SDK as an application sets one up: a tracer provider with a batch span processor (to an
    exporter that drops the spans, so no network is measured) and, with ``metrics``, a meter provider aggregating
    the metrics."""
    from collections.abc import Sequence

    from opentelemetry import metrics as metrics_api
    from opentelemetry import trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Drop()))
    trace.set_tracer_provider(provider)
    if metrics:
        metrics_api.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))


async def measure_ab(path: str, base_url: str, runs: int, warmup: int, batch: int = 10) -> dict[str, Any]:
    """CPU ms per tool round of a RobotLab path with instrumentation off, on, and on the bare SDK's floor (the
    same spans made by ``_sdk_floor``'s stand-ins) in rotated batches, in this one process: what the spans and
    metrics cost and what share of it is the SDK's, the load of the machine the same for all three."""
    import robotlab
    from benchmarks._sdk_floor import floor_telemetry, swap

    fn = make_path(path, base_url)["tool"]
    text = prompt(0)
    for _ in range(warmup):
        await fn(text)
    floor = floor_telemetry() if path != "robotlab" else {}  # API only: no SDK, no floor
    arms = ["off", "on", "floor"] if floor else ["off", "on"]
    seen: dict[str, list[float]] = {arm: [] for arm in arms}
    for index in range(len(arms) * max(runs // batch, 1)):
        arm = arms[index % len(arms)]
        robotlab.configure(instrument=arm != "off")
        with swap(floor if arm == "floor" else {}):
            start = time.process_time()
            for _ in range(batch):
                await fn(text)
            seen[arm].append((time.process_time() - start) / batch * 1000)
    robotlab.configure(instrument=True)
    return {f"{arm}_cpu_ms": values for arm, values in seen.items()}


async def measure(path: str, mode: str, base_url: str, latency_ms: int, runs: int, warmup: int) -> dict[str, Any]:
    """Time ``runs`` sequential calls of ``mode`` after ``warmup`` (wall ms each, or CPU us per token)."""
    if mode == "tool-ab":
        return await measure_ab(path, base_url, runs, warmup)
    if mode == "spans":  # the telemetry calls of a tool round alone, no network (``_sdk_floor.spans_alone``)
        from benchmarks._sdk_floor import spans_alone

        make_path(path, base_url)  # configures RobotLab and installs the SDK
        return await asyncio.to_thread(spans_alone, f"openai/{MODEL}", runs)
    fn = make_path(path, base_url)[mode]
    text = prompt(latency_ms) if mode != "stream" else "[stream] tell me a long story"
    for _ in range(warmup):
        await fn(text)
    if mode == "stream":
        cpu, tokens = 0.0, 0
        for _ in range(runs):
            start = time.process_time()
            tokens += await fn(text)
            cpu += time.process_time() - start
        return {"us_per_token": cpu / max(tokens, 1) * 1e6, "tokens": tokens}
    times, cpu_times = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        await fn(text)
        times.append((time.perf_counter() - start) * 1000)
        cpu_times.append((time.process_time() - cpu) * 1000)
    return {"ms": times, "cpu_ms": cpu_times}


if __name__ == "__main__":
    sys.path.remove(HERE)  # benchmarks/mcp.py must not shadow the mcp package the peers import
    name, mode, url, latency, count, warm = sys.argv[1:7]
    print(json.dumps(asyncio.run(measure(name, mode, url, int(latency), int(count), int(warm)))))
