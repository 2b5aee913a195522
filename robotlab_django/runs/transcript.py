"""A thread's transcript: as data for JSON export, and as display items for the admin.

The transcript comes from each run's stored chat messages: user turns, assistant replies,
tool calls (name and arguments) and tool results, in order. Nothing here produces HTML;
templates render the items with autoescaping on.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.db.models import Count, Sum

from robotlab_django.encoders import RobotLabJSONEncoder

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult, Thread

__all__ = ["TranscriptItem", "TranscriptRun", "export_thread", "export_threads", "run_items", "transcript_runs"]

#: Result fields included in an export, in order.
EXPORTED_FIELDS = (
    "sequence_number", "robot_name", "status", "input", "reply", "messages", "output_data", "tool_calls_data",
    "stop_reason", "checksum", "model", "input_tokens", "output_tokens", "cost", "duration", "error",
    "error_type", "delegated_by", "run_id", "task_id", "attempts", "created_at", "started_at", "finished_at",
)


@dataclass(frozen=True)
class TranscriptItem:
    """One line of a transcript: ``kind`` is ``user``, ``assistant``, ``tool_call`` or ``tool_result``.

    ``step`` is the model call the line came from (1 for the run's first assistant message, ...; a tool result
    has its call's; 0 for a user turn): the admin's trace links a model call's span to it.
    """

    kind: str
    text: str
    name: str = ""
    call_id: str = ""
    step: int = field(default=0, compare=False)


@dataclass
class TranscriptRun:
    """One run with its items, for display."""

    result: Any
    items: list[TranscriptItem] = field(default_factory=list)


def _pretty(value: object) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
        if isinstance(value, str):
            return value
    return json.dumps(value, indent=2, ensure_ascii=False, cls=RobotLabJSONEncoder)


def _part(part: object) -> str:
    """A content part as the transcript shows it: its text, or what file it carries (never its base64 data)."""
    if not isinstance(part, dict):
        return str(part)
    if "text" in part:
        return str(part["text"])
    kind = str(part.get("type", "part"))
    if kind == "image_url":
        url = str((part.get("image_url") or {}).get("url", ""))
        return f"[image: {url.split(',')[0] if url.startswith('data:') else url}]"
    if kind == "file":
        return f"[file: {(part.get('file') or {}).get('filename', '')}]"
    return f"[{kind}]"


def _content(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):  # content parts
        return "\n".join(_part(part) for part in value)
    return value if isinstance(value, str) else _pretty(value)


def run_items(result: RobotResult) -> list[TranscriptItem]:
    """The transcript items of one run, from its stored messages (its input when it has none)."""
    messages = result.messages or []
    if not messages:
        return [TranscriptItem("user", result.input)] if result.input else []
    items: list[TranscriptItem] = []
    names: dict[str, str] = {}
    steps: dict[str, int] = {}
    step = 0
    for message in messages:
        role = message.get("role")
        if role == "user":
            items.append(TranscriptItem("user", _content(message.get("content"))))
        elif role == "assistant":
            step += 1
            text = _content(message.get("content"))
            if text:
                items.append(TranscriptItem("assistant", text, step=step))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                call_id = str(call.get("id") or "")
                names[call_id], steps[call_id] = str(function.get("name") or ""), step
                items.append(TranscriptItem("tool_call", _pretty(function.get("arguments") or "{}"),
                                            name=names[call_id], call_id=call_id, step=step))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            name = str(message.get("name") or names.get(call_id, ""))
            items.append(TranscriptItem("tool_result", _pretty(message.get("content")), name=name, call_id=call_id,
                                        step=steps.get(call_id, step)))
    return items


def transcript_runs(results: Iterable[RobotResult]) -> list[TranscriptRun]:
    """Display items for each run of ``results`` (already ordered)."""
    return [TranscriptRun(result=result, items=run_items(result)) for result in results]


def _money(value: Decimal | None) -> str:
    return str(Decimal(value or 0).quantize(Decimal("0.00000001")))


def _result_dict(result: RobotResult) -> dict[str, Any]:
    data = {name: getattr(result, name) for name in EXPORTED_FIELDS}
    data["cost"] = _money(result.cost)
    return data


def export_thread(thread: Thread) -> dict[str, Any]:
    """Everything stored about ``thread`` as JSON-ready data: the thread, its totals and its runs."""
    results = list(thread.results.order_by("sequence_number"))
    totals = thread.results.aggregate(runs=Count("pk"), input_tokens=Sum("input_tokens"),
                                      output_tokens=Sum("output_tokens"), cost=Sum("cost"))
    return {
        "session_id": thread.session_id,
        "robot_name": thread.robot_name,
        "user": str(thread.user) if thread.user_id else None,
        "initial_input": thread.initial_input,
        "input_metadata": thread.input_metadata,
        "state_data": thread.state_data,
        "last_user_message": thread.last_user_message,
        "last_user_message_at": thread.last_user_message_at,
        "created_at": thread.created_at,
        "updated_at": thread.updated_at,
        "totals": {"runs": totals["runs"] or 0, "input_tokens": totals["input_tokens"] or 0,
                   "output_tokens": totals["output_tokens"] or 0, "cost": _money(totals["cost"])},
        "results": [_result_dict(result) for result in results],
    }


#: ``<``, ``>`` and ``&`` become JSON escapes (as in Django's ``json_script``): the parsed data is the
#: same, and no browser can take a download for HTML.
_HTML_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def export_threads(threads: Iterable[Thread]) -> str:
    """The JSON text of :func:`export_thread` for each thread (``{"threads": [...]}``), indented."""
    data = {"threads": [export_thread(thread) for thread in threads]}
    return json.dumps(data, indent=2, ensure_ascii=False, cls=RobotLabJSONEncoder).translate(_HTML_ESCAPES)
