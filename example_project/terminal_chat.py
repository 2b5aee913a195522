"""Chat with the example robot in a terminal.

With ROBOT_LAB_MODEL and a provider key set it uses that model; otherwise the offline demo
model, which streams and calls the example tools (try "what time is it?" or "12 * 7").

    python example_project/terminal_chat.py            # interactive
    python example_project/terminal_chat.py "12 * 7"   # one message
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from example_tools import calculate, current_time  # noqa: E402

import robotlab  # noqa: E402
from robotlab.testing import DemoLLM  # noqa: E402


def make_robot() -> robotlab.Robot:
    """The chat robot, on the configured model or the offline demo model."""
    options = {}
    if robotlab.get_config().default_model() is None:
        print("(no LLM configured: using the offline demo model)")
        options["llm"] = DemoLLM(delay=0.01)
    return robotlab.build(name="chat", system_prompt="You are a friendly assistant. Use your tools when useful.",
                          local_tools=[calculate, current_time],
                          on_content=lambda chunk: print(chunk.content, end="", flush=True), **options)


def summary(input_tokens: int, output_tokens: int, tool_calls: int) -> str:
    """The line after each reply: ``[12 in / 4 out tokens, 1 tool call]``."""
    return f"[{input_tokens} in / {output_tokens} out tokens, {tool_calls} tool call{'' if tool_calls == 1 else 's'}]"


def main(argv: list[str]) -> None:
    robot = make_robot()
    messages = [" ".join(argv)] if argv else None
    while True:
        text = messages.pop(0) if messages else (None if messages is not None else input("\nyou> "))
        if not text:
            break
        print("robot> ", end="")
        result = robot.run(text)
        print(f"\n{summary(result.input_tokens, result.output_tokens, len(result.tool_calls))}")
        if messages is not None and not messages:
            break


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (EOFError, KeyboardInterrupt):
        print()
