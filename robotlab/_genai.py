"""The attributes of :mod:`robotlab.telemetry`'s spans and metrics, by the OpenTelemetry GenAI conventions.

What a span or a measurement is given at its start depends on a few values that repeat from call to call (the
robot, the model, the tool), so each set is built once and kept: a traced call copies a kept dict (or hands it
to the SDK as it is, which copies it) instead of building one key by key. The kept sets are never changed after
they are made; each cache holds at most :data:`CACHE_SIZE` of them and starts again when full.

Also here: ``gen_ai.provider.name`` (:func:`provider_name`), ``error.type`` (:func:`error_type`) and the
conventions' message schema for recorded contents (:func:`message`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

__all__ = ["CACHE_SIZE", "Attributes", "agent_span", "chat_metrics", "chat_span", "error_type", "message",
           "provider_name", "to_json", "tool_span"]

#: Attribute values by name, as a span or a measurement takes them.
Attributes = dict[str, Any]

K = TypeVar("K")
V = TypeVar("V")

#: The most attribute sets each cache keeps (more distinct robots, models or tools than this: it starts again).
CACHE_SIZE = 512

#: litellm's provider prefixes whose GenAI name differs (the others are the same: openai, anthropic, groq, ...).
_PROVIDERS = {"gemini": "gcp.gemini", "vertex_ai": "gcp.vertex_ai", "vertex_ai_beta": "gcp.vertex_ai",
              "bedrock": "aws.bedrock", "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference",
              "mistral": "mistral_ai", "xai": "x_ai", "watsonx": "ibm.watsonx.ai", "moonshot": "moonshot_ai"}

_agents: dict[tuple[str, str | None, str | None], tuple[str, Attributes]] = {}
_chats: dict[tuple[str | None, str | None, bool], tuple[str, Attributes, Attributes]] = {}
_tools: dict[tuple[str, str | None, str | None], tuple[str, Attributes]] = {}
_metrics: dict[tuple[str, str | None, str | None, str | None], tuple[Attributes, Attributes, Attributes]] = {}


def _keep(cache: dict[K, V], key: K, value: V) -> V:
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value


def error_type(error: BaseException) -> str:
    """``error.type`` for ``error``: its class name, qualified by its module unless it is a builtin."""
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def provider_name(model: str | None, llm: object = None) -> str:
    """``gen_ai.provider.name`` for ``model`` (litellm's ``provider/name``) or the client's ``provider``."""
    if model and "/" in model:
        prefix = model[: model.index("/")]
    else:
        client: Any = getattr(llm, "provider", None)
        if not isinstance(client, str) or not client:
            return "_OTHER"
        prefix = client
    return _PROVIDERS.get(prefix, prefix)


def agent_span(robot_name: str, model: str | None, description: str | None) -> tuple[str, Attributes]:
    """The name and the fixed attributes of a robot's ``invoke_agent`` span (kept: never change them)."""
    key = (robot_name, model, description)
    kept = _agents.get(key)
    if kept is not None:
        return kept
    attributes: Attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": robot_name}
    if model:
        attributes["gen_ai.request.model"] = model
        attributes["gen_ai.provider.name"] = provider_name(model)
    if description:
        attributes["gen_ai.agent.description"] = description
    return _keep(_agents, key, (f"invoke_agent {robot_name}", attributes))


def chat_span(model: str | None, llm: object, streamed: bool) -> tuple[str, Attributes, Attributes]:
    """The name, the fixed span attributes and the metrics' attributes of a ``chat`` call (kept: never change them).

    The metrics' attributes are the ones the conventions give both histograms (operation, provider, request model);
    the span's add ``gen_ai.request.stream`` for a streamed call.
    """
    client = None if model and "/" in model else getattr(llm, "provider", None)
    key = (model, client if isinstance(client, str) else None, streamed)
    kept = _chats.get(key)
    if kept is not None:
        return kept
    common: Attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name(model, llm)}
    if model:
        common["gen_ai.request.model"] = model
    span = {**common, "gen_ai.request.stream": True} if streamed else common
    return _keep(_chats, key, (f"chat {model}" if model else "chat", span, common))


def chat_metrics(common: Attributes, response_model: str | None,
                 error: str | None) -> tuple[Attributes, Attributes, Attributes]:
    """The attributes of a ``chat`` call's duration, input-token and output-token measurements (kept).

    ``common`` is :func:`chat_span`'s third value; ``response_model`` and ``error`` (``error.type``) are added
    where given.
    """
    key = (common["gen_ai.provider.name"], common.get("gen_ai.request.model"), response_model, error)
    kept = _metrics.get(key)
    if kept is not None:
        return kept
    duration = dict(common)
    if response_model:
        duration["gen_ai.response.model"] = response_model
    if error is not None:
        duration["error.type"] = error
    return _keep(_metrics, key, (duration, {**duration, "gen_ai.token.type": "input"},
                                 {**duration, "gen_ai.token.type": "output"}))


def tool_span(name: str, tool: object) -> tuple[str, Attributes]:
    """The name and the fixed attributes of ``tool``'s ``execute_tool`` span, all but the call's id (kept)."""
    description = getattr(tool, "description", None)
    if not isinstance(description, str):
        description = None
    mcp = getattr(tool, "mcp", None)
    key = (name, description, str(mcp) if mcp else None)
    kept = _tools.get(key)
    if kept is not None:
        return kept
    attributes: Attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                              "gen_ai.tool.type": "extension" if mcp else "function"}
    if description:
        attributes["gen_ai.tool.description"] = description
    if key[2]:
        attributes["robotlab.mcp.server"] = key[2]
    return _keep(_tools, key, (f"execute_tool {name}", attributes))


def to_json(value: object) -> str:
    """``value`` as a recorded content attribute: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def message(item: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    """An OpenAI-format message in the conventions' message schema (role and parts)."""
    role = item.get("role")
    parts: list[dict[str, Any]] = []
    content = item.get("content")
    if role == "tool":
        parts.append({"type": "tool_call_response", "id": item.get("tool_call_id"), "response": content})
    elif isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": content})
    elif isinstance(content, Sequence):
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                parts.append({"type": "text", "content": part.get("text")})
            elif isinstance(part, Mapping):  # an attachment: its kind only, never its bytes
                parts.append({"type": str(part.get("type") or "_other")})
    for call in item.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append({"type": "tool_call", "id": call.get("id"), "name": function.get("name"),
                      "arguments": function.get("arguments")})
    out: dict[str, Any] = {"role": role, "parts": parts}
    if finish_reason is not None:
        out["finish_reason"] = finish_reason
    return out
