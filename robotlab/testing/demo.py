"""DemoLLM: an offline model for demos and the example project.

It needs no key and no network. It calls a tool when the request plainly asks for one
(the tool whose name and description share the most words with the message, or ``calculate`` for
arithmetic), then answers in words using the tool's result, streaming word by word. An integer
parameter the tool requires gets the first number of the message, and a parameter with an ``enum``
gets the value the message names ("mark order 2 shipped": ``{"id": 2, "status": "shipped"}``).
Asked about Markdown, it answers with a sample of it (a list, a table, a code block and a link), as a
real model's replies are. It is a stand-in that makes every part of a page work, not a language model.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from ..llm.types import LLMRequest, LLMResponse, TextCallback, ToolCallRequest

__all__ = ["DemoLLM"]

_ARITHMETIC = re.compile(r"(-?\d+(?:\.\d+)?(?:\s*(?:\*\*|//|[-+*/%])\s*-?\d+(?:\.\d+)?)+)")
#: Parameters that name a place: given the words after "in"/"at"/"for" ("weather in Paris" -> "Paris").
_PLACE_PARAMETERS = {"location", "city", "place", "where", "country", "region"}
_PLACE = re.compile(r"\b(?:in|at|for)\s+([A-Z][\w .'-]*?)\s*[?.!]*$")
#: Options a message lists after a colon ("which plan: basic, pro or team"), offered as a tool's ``choices``.
_OPTIONS = re.compile(r":\s*([^:]+?\bor\b[^:]+?)\s*[?.!]*$")
_STOP = {
    "the",
    "a",
    "an",
    "is",
    "it",
    "what",
    "whats",
    "of",
    "to",
    "in",
    "for",
    "and",
    "me",
    "you",
    "please",
    "get",
    "current",
    "tool",
    "tools",
    "use",
    "does",
    "do",
    "can",
    "i",
    "my",
    "your",
    "how",
}


#: The reply to a message that mentions Markdown: what a chat page must render.
MARKDOWN_SAMPLE = """Here is some **Markdown**, as a real model writes it:

- a list item
- another, with `inline code`

| robot | role |
|---|---|
| planner | plans |
| writer | writes |

```python
def greet(name: str) -> str:
    return f"Hello, {name}!"
```

Read more in the [RobotLab docs](https://github.com/MadBomber/robot_lab)."""


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if w not in _STOP and len(w) > 2}


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


#: A whole number standing alone ("order 2", not "A-1002" or "2.5").
_INTEGER = re.compile(r"(?<![\w.-])\d+(?![\w.])")


def _argument(name: str, spec: dict[str, Any], text: str) -> Any:
    """The value for the required parameter ``name``.

    The first number of the message for an integer, the place the message names for a place, else the whole message.
    """
    if spec.get("type") == "integer":
        number = _INTEGER.search(text)
        if number:
            return int(number.group(0))
    place = _PLACE.search(text.strip()) if name.lower() in _PLACE_PARAMETERS else None
    return place.group(1).strip() if place else text


def _named_choice(spec: dict[str, Any], text: str) -> str | None:
    """The value of a parameter's ``enum`` that the message names as a word, if one does."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    return next((value for value in spec.get("enum") or [] if isinstance(value, str) and value in words), None)


class DemoLLM:
    """The offline demo model.

    Args:
        delay: Seconds between streamed words: 0.02 by default, so a chat page shows the reply
            streaming as a real model's would; 0 answers at once (for tests). A tool call comes after
            :data:`THINK_WORDS` times that, as a real model's takes a moment.
    """

    THINK_WORDS = 8
    """How many words' time the model takes before it answers with a tool call."""

    def __init__(self, *, delay: float = 0.02) -> None:
        self.delay = delay
        self._calls = 0

    def _pick_tool(self, request: LLMRequest, text: str) -> tuple[str, dict[str, Any]] | None:
        tools = [t["function"] for t in request.tools if t.get("type") == "function"]
        names = {t["name"] for t in tools}
        expression = _ARITHMETIC.search(text)
        for name in ("calculate", "calculator"):
            if expression and name in names:
                return name, {"expression": expression.group(1).replace(" ", "")}
        words = _words(text)
        scores = [len(words & (_words(spec["name"].replace("_", " ")) | _words(spec.get("description", ""))))
                  for spec in tools]
        if not scores or max(scores) == 0:
            return None
        spec = tools[scores.index(max(scores))]  # the most words in common; the first such tool
        parameters = spec.get("parameters", {})
        properties = parameters.get("properties", {})
        arguments: dict[str, Any] = {name: _argument(name, properties.get(name, {}), text)
                                     for name in parameters.get("required", [])}
        for name, property_spec in properties.items():
            choice = _named_choice(property_spec, text)
            if choice is not None:
                arguments[name] = choice
        options = _OPTIONS.search(text)
        if options and "choices" in properties:
            arguments["choices"] = [o.strip() for o in re.split(r",|\bor\b", options.group(1)) if o.strip()]
        return spec["name"], arguments

    def _answer(self, request: LLMRequest) -> LLMResponse:
        messages = request.messages
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last.get("role") == "tool":
            results = []
            for message in reversed(messages):
                if message.get("role") != "tool":
                    break
                results.append(f"{message.get('name', 'the tool')} returned {_content(message)}")
            reply = "I asked my tools: " + "; ".join(reversed(results)) + "."
            return LLMResponse(content=reply, finish_reason="stop")
        text = _content(last)
        choice = self._pick_tool(request, text)
        if choice is not None:
            self._calls += 1
            name, arguments = choice
            call = ToolCallRequest(id=f"demo_{self._calls}", name=name, arguments=json.dumps(arguments))
            return LLMResponse(tool_calls=[call], finish_reason="tool_calls")
        if "markdown" in text.lower():
            return LLMResponse(content=MARKDOWN_SAMPLE, finish_reason="stop")
        reply = (
            f"This is the offline demo model (no LLM is configured). You said: {text.strip()!r}. "
            "Set ROBOT_LAB_MODEL and a provider key such as OPENAI_API_KEY to talk to a real model."
        )
        return LLMResponse(content=reply, finish_reason="stop")

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """Answer offline; stream word by word when asked."""
        response = self._answer(request)
        prompt = sum(len(_content(m)) for m in request.messages)
        response.input_tokens = max(1, prompt // 4)
        response.output_tokens = max(1, len(response.content or "") // 4)
        response.model = "demo"
        if response.tool_calls and self.delay:
            await asyncio.sleep(self.delay * self.THINK_WORDS)
        if on_text is not None and response.content:
            for piece in re.findall(r"\S+\s*", response.content):
                on_text(piece)
                if self.delay:
                    await asyncio.sleep(self.delay)
        return response
