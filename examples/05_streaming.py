"""05 - Streaming: watch a run as it happens.

Shows ``robot.stream(...)``, which yields events (``run.started``, ``text.delta``, ``tool_call.started``,
``tool_call.completed``, ``usage.updated``, ``run.completed``, ``stream.ended``) while the run goes on, the
``on_content`` callback that receives the text as it is written, and ``astream`` in async code.

Run it: ``python examples/05_streaming.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import asyncio
from collections import Counter

from _offline import llm

import robotlab
from robotlab.testing import tool_call


@robotlab.tool
def get_forecast(city: str) -> dict:
    """Tomorrow's forecast for a city.

    Args:
        city: A city name, such as "Paris".
    """
    return {"city": city, "sky": "sunny", "high_c": 24}


robot = robotlab.build(
    name="forecaster",
    system_prompt="You answer weather questions with get_forecast. Be brief.",
    local_tools=[get_forecast],
    llm=llm(
        tool_call("get_forecast", city="Paris"),
        "Tomorrow in Paris will be sunny with a high of 24 degrees.",
        "Once upon a time a lighthouse kept watch over a quiet sea.",
        "Rome will be warm and clear.",
    ),
)

print("1. events from robot.stream()")
kinds: Counter[str] = Counter()
for event in robot.stream("Will it be sunny in Paris tomorrow?"):
    kinds[event.kind] += 1
    if event.kind == "tool_call.started":
        print(f"   [{event.seq}] calling {event.data['name']}({event.data['arguments']})")
    elif event.kind == "tool_call.completed":
        print(f"   [{event.seq}] {event.data['name']} returned {event.data['result']}")
    elif event.kind == "text.delta":
        print(event.data["text"], end="", flush=True)
    elif event.kind == "run.completed":
        print(f"\n   [{event.seq}] done: {event.data['input_tokens']} + {event.data['output_tokens']} tokens")
print(f"   event kinds: {dict(kinds)}")

print("2. text as it arrives with on_content")
pieces: list[str] = []
result = robot.run("Tell me a one-line story.", on_content=lambda chunk: pieces.append(chunk.content))
print(f"   {len(pieces)} chunks, joined == reply: {''.join(pieces) == result.reply}")


async def main() -> None:
    print("3. astream in async code")
    async for event in robot.astream("And in Rome?"):
        if event.kind == "text.delta":
            print(event.data["text"], end="", flush=True)
    print()


asyncio.run(main())
