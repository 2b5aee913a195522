"""The paths ``peers.py`` and ``streaming_cost.py`` compare, each run in its own child process.

A child imports only its own path (``python benchmarks/_peers.py PATH MODE BASE_URL ...``) and prints one JSON
line. The peer frameworks (pydantic-ai, openai-agents) are not project dependencies: :func:`ensure_peers`
installs them with ``pip install --target`` into a directory put first on the child's ``PYTHONPATH``.

Modes: ``plain`` (one call, ms each), ``tool`` (a tool round: the model asks for two tools, they run, the
model answers: two calls; ms each) and ``stream`` (CPU seconds per streamed token over a long reply).
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
                       llm_transport="litellm" if path == "robotlab-litellm" else "auto")

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


async def measure(path: str, mode: str, base_url: str, latency_ms: int, runs: int, warmup: int) -> dict[str, Any]:
    """Time ``runs`` sequential calls of ``mode`` after ``warmup`` (wall ms each, or CPU us per token)."""
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
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await fn(text)
        times.append((time.perf_counter() - start) * 1000)
    return {"ms": times}


if __name__ == "__main__":
    sys.path.remove(HERE)  # benchmarks/mcp.py must not shadow the mcp package the peers import
    name, mode, url, latency, count, warm = sys.argv[1:7]
    print(json.dumps(asyncio.run(measure(name, mode, url, int(latency), int(count), int(warm)))))
