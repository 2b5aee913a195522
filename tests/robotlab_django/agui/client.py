"""An AG-UI client for the tests: POST a ``RunAgentInput``, read the SSE frames, check them as the official client does.

:func:`checked` parses every event with the official ``ag-ui-protocol`` models and holds the stream to the rules
``@ag-ui/client``'s ``verifyEvents`` enforces (a run opens with ``RUN_STARTED``; messages, tool calls, steps and
subagents are opened before they are used and closed before ``RUN_FINISHED``; nothing follows ``RUN_FINISHED`` or
``RUN_ERROR``). :func:`messages` folds events into the message list a client keeps.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from django.test import Client

ag_ui = pytest.importorskip("ag_ui.core")
from pydantic import TypeAdapter  # noqa: E402

EVENT = TypeAdapter(ag_ui.Event)

Frame = tuple[str | None, dict[str, Any]]


def run_input(text: str | None = "Hello", *, thread: str = "t1", run: str = "r1", **extra: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` as ``HttpAgent`` sends one: the new user message last."""
    messages = [{"id": f"{run}-user", "role": "user", "content": text}] if text is not None else []
    return {"threadId": thread, "runId": run, "messages": messages, "tools": [], "context": [], "state": {},
            "forwardedProps": {}, **extra}


def post(path: str, body: Any, *, token: str | None = None, client: Client | None = None, **headers: str) -> Any:
    """POST ``body`` (JSON, or bytes as they are) to ``path``."""
    if token:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    data = body if isinstance(body, bytes) else json.dumps(body)
    return (client or Client()).post(path, data, content_type="application/json", **headers)


def frames(response: Any) -> list[Frame]:
    """The ``(id, event)`` of every SSE frame of a stream (the test client is WSGI: it reads the stream whole)."""
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/event-stream"
    with warnings.catch_warnings():  # the WSGI test client consumes the async stream synchronously
        warnings.simplefilter("ignore")
        body = b"".join(response).decode()
    found: list[Frame] = []
    for block in body.split("\n\n"):
        lines = block.splitlines()
        data = [line[len("data: "):] for line in lines if line.startswith("data: ")]
        if data:
            ident = next((line[len("id: "):] for line in lines if line.startswith("id: ")), None)
            found.append((ident, json.loads("\n".join(data))))
    return found


def checked(found: list[Frame]) -> list[dict[str, Any]]:
    """The events of ``found``, each parsed by the official models and the stream held to the client's rules."""
    events = [event for _, event in found]
    for event in events:
        EVENT.validate_python(event)
    assert events and events[0]["type"] == "RUN_STARTED", events[:1]
    texts: set[str] = set()
    calls: set[str] = set()
    steps: set[tuple[str | None, str]] = set()
    subagents: set[str] = set()
    ended: set[str] = set()
    for index, event in enumerate(events):
        kind = event["type"]
        assert "subagentRunId" not in event or event["subagentRunId"] is not None
        if kind in ("RUN_FINISHED", "RUN_ERROR"):
            assert index == len(events) - 1, f"{kind} is not last: {events[index + 1:]}"
        if kind == "RUN_FINISHED":
            assert not (texts or calls or steps or subagents), (texts, calls, steps, subagents)
        elif kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in texts
            texts.add(event["messageId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert event["messageId"] in texts, event
            if kind == "TEXT_MESSAGE_END":
                texts.discard(event["messageId"])
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in calls
            calls.add(event["toolCallId"])
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert event["toolCallId"] in calls, event
            if kind == "TOOL_CALL_END":
                calls.discard(event["toolCallId"])
        elif kind == "STEP_STARTED":
            step = (event.get("subagentRunId"), event["stepName"])
            assert step not in steps
            steps.add(step)
        elif kind == "STEP_FINISHED":
            steps.remove((event.get("subagentRunId"), event["stepName"]))
        elif kind == "SUBAGENT_STARTED":
            assert event["subagentRunId"] not in subagents | ended, "a subagent id is used once in a run"
            subagents.add(event["subagentRunId"])
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            subagents.remove(event["subagentRunId"])
            ended.add(event["subagentRunId"])
    return events


def messages(events: list[dict[str, Any]], kept: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The message list a client keeps after ``events`` (starting from ``kept``), as ``@ag-ui/client`` folds them."""
    found = [dict(message) for message in kept or []]

    def by_id(key: str) -> dict[str, Any] | None:
        return next((message for message in found if message["id"] == key), None)

    for event in events:
        kind = event["type"]
        if kind == "MESSAGES_SNAPSHOT":
            found = [dict(message) for message in event["messages"]]
        elif kind == "TEXT_MESSAGE_START":
            found.append({"id": event["messageId"], "role": "assistant", "content": ""})
        elif kind == "TEXT_MESSAGE_CONTENT":
            message = by_id(event["messageId"])
            assert message is not None
            message["content"] += event["delta"]
        elif kind == "TOOL_CALL_START":
            parent = by_id(event.get("parentMessageId") or "") if event.get("parentMessageId") else None
            if parent is None:
                parent = {"id": event.get("parentMessageId") or event["toolCallId"], "role": "assistant"}
                found.append(parent)
            parent.setdefault("toolCalls", []).append(
                {"id": event["toolCallId"], "function": {"name": event["toolCallName"], "arguments": ""}})
        elif kind == "TOOL_CALL_ARGS":
            call = next(call for message in found for call in message.get("toolCalls", [])
                        if call["id"] == event["toolCallId"])
            call["function"]["arguments"] += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            found.append({"id": event["messageId"], "role": "tool", "toolCallId": event["toolCallId"],
                          "content": event["content"]})
    return found


def text_of(events: list[dict[str, Any]]) -> str:
    """Every ``TEXT_MESSAGE_CONTENT`` delta, joined."""
    return "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT")


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of type ``kind``."""
    return [event for event in events if event["type"] == kind]
