"""One frozen class per event kind: what each kind carries, and the union a consumer switches on.

``Event.typed()`` (or :func:`~robotlab.streaming.parse_event`) gives an event as its kind's class; a consumer
matches on the union :data:`StreamEvent` and ends with ``assert_never``, so a new kind that it does not handle
fails the type check (and :func:`~robotlab.streaming.handling_table`, at import)::

    match event.typed():
        case TextDelta(text=text):
            ...
        case RunFailed(error=error) | StepFailed(error=error):
            ...

Every payload field has a default, so an event stored before a field existed still reads. The kinds marked
*reserved* are RobotLab's names that this port does not emit; their payload, if any, is in ``extra``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .events import OtherEvent, TypedEvent, optional, register

__all__ = [
    "EVENT_TYPES",
    "DataDelta",
    "HitlRequested",
    "HitlResolved",
    "KnownEvent",
    "MetadataUpdated",
    "PartCompleted",
    "PartCreated",
    "PartFailed",
    "ReasoningDelta",
    "RunCancelled",
    "RunCompleted",
    "RunFailed",
    "RunInterrupted",
    "RunStarted",
    "StepCompleted",
    "StepFailed",
    "StepStarted",
    "StreamEnded",
    "StreamEvent",
    "TextDelta",
    "ToolCallArgumentsDelta",
    "ToolCallCompleted",
    "ToolCallOutputDelta",
    "ToolCallStarted",
    "UsageUpdated",
]



@register
@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(TypedEvent):
    """A run began: a robot's (``robot``) or a network's (``network``), with the ``message`` it was given."""

    kind: Literal["run.started"] = field(default="run.started", init=False)
    message: str | None = None


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class RunCompleted(TypedEvent):
    """A run ended with its ``reply``: a robot's with its stop reason and totals, a network's with its ``tasks``."""

    kind: Literal["run.completed"] = field(default="run.completed", init=False)
    reply: str | None = None
    stop_reason: str | None = optional()
    input_tokens: int | None = optional()
    output_tokens: int | None = optional()
    cost: float | None = optional()
    tasks: list[str] | None = optional()


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class RunFailed(TypedEvent):
    """A run raised: the ``error`` message, the exception's class name, and a provider error's ``error_kind``."""

    kind: Literal["run.failed"] = field(default="run.failed", init=False)
    error: str = ""
    error_type: str = ""
    error_kind: str | None = optional()


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class RunCancelled(TypedEvent):
    """A run was stopped; a run stopped by the Django app carries the ``reply`` its row keeps."""

    kind: Literal["run.cancelled"] = field(default="run.cancelled", init=False)
    reply: str | None = optional()


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class RunInterrupted(TypedEvent):
    """Reserved: RobotLab's interrupted run."""

    kind: Literal["run.interrupted"] = field(default="run.interrupted", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class StepStarted(TypedEvent):
    """A network's task began (``network``, ``task``, ``robot``)."""

    kind: Literal["step.started"] = field(default="step.started", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class StepCompleted(TypedEvent):
    """A network's task ended with its robot's ``reply`` (``None`` when its value is no robot's result)."""

    kind: Literal["step.completed"] = field(default="step.completed", init=False)
    reply: str | None = None


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class StepFailed(TypedEvent):
    """A network's task failed: it raised, or its robot failed (then with the ``"Error: ..."`` ``reply`` it gave)."""

    kind: Literal["step.failed"] = field(default="step.failed", init=False)
    reply: str | None = optional()
    error: str = ""
    error_type: str = ""
    error_kind: str | None = optional()


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class PartCreated(TypedEvent):
    """Reserved: RobotLab's message part."""

    kind: Literal["part.created"] = field(default="part.created", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class PartCompleted(TypedEvent):
    """Reserved: RobotLab's message part."""

    kind: Literal["part.completed"] = field(default="part.completed", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class PartFailed(TypedEvent):
    """Reserved: RobotLab's message part."""

    kind: Literal["part.failed"] = field(default="part.failed", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted(TypedEvent):
    """A tool is about to run: the call's ``id``, the tool's ``name``, the parsed ``arguments`` (or their text)."""

    kind: Literal["tool_call.started"] = field(default="tool_call.started", init=False)
    id: str = ""
    name: str = ""
    arguments: dict[str, Any] | str | None = None


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallCompleted(TypedEvent):
    """A tool ran: the ``result`` text sent to the model, and whether it is an error."""

    kind: Literal["tool_call.completed"] = field(default="tool_call.completed", init=False)
    id: str = ""
    name: str = ""
    result: str = ""
    is_error: bool = False


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(TypedEvent):
    """A piece of the model's ``text`` (the Django app merges consecutive ones before they cross a process)."""

    kind: Literal["text.delta"] = field(default="text.delta", init=False)
    text: str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallArgumentsDelta(TypedEvent):
    """Reserved: a piece of a tool call's arguments."""

    kind: Literal["tool_call.arguments.delta"] = field(default="tool_call.arguments.delta", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallOutputDelta(TypedEvent):
    """Reserved: a piece of a tool's output."""

    kind: Literal["tool_call.output.delta"] = field(default="tool_call.output.delta", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta(TypedEvent):
    """Reserved: a piece of the model's reasoning."""

    kind: Literal["reasoning.delta"] = field(default="reasoning.delta", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class DataDelta(TypedEvent):
    """Reserved: a piece of structured data."""

    kind: Literal["data.delta"] = field(default="data.delta", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class HitlRequested(TypedEvent):
    """A tool asked the person a ``question`` (``request_id``, the ``choices`` offered, the ``default``)."""

    kind: Literal["hitl.requested"] = field(default="hitl.requested", init=False)
    request_id: str = ""
    question: str = ""
    choices: list[str] = field(default_factory=list)
    default: str | None = None


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class HitlResolved(TypedEvent):
    """The question ``request_id`` is settled: its ``answer`` and ``status`` (answered, timeout, cancelled)."""

    kind: Literal["hitl.resolved"] = field(default="hitl.resolved", init=False)
    request_id: str | None = None
    answer: str | None = None
    status: str = ""


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class UsageUpdated(TypedEvent):
    """The run's totals so far, after a model response: tokens in and out, and the cost in dollars."""

    kind: Literal["usage.updated"] = field(default="usage.updated", init=False)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataUpdated(TypedEvent):
    """Reserved: RobotLab's run metadata."""

    kind: Literal["metadata.updated"] = field(default="metadata.updated", init=False)


@register
@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnded(TypedEvent):
    """The last event of a run's stream (a network task's, in the Django app, carries its ``task``)."""

    kind: Literal["stream.ended"] = field(default="stream.ended", init=False)


#: The events of the kinds :data:`~robotlab.streaming.EventKind` names.
KnownEvent = (RunStarted | RunCompleted | RunFailed | RunCancelled | RunInterrupted | StepStarted | StepCompleted
              | StepFailed | PartCreated | PartCompleted | PartFailed | ToolCallStarted | ToolCallCompleted
              | TextDelta | ToolCallArgumentsDelta | ToolCallOutputDelta | ReasoningDelta | DataDelta
              | HitlRequested | HitlResolved | UsageUpdated | MetadataUpdated | StreamEnded)
#: Every typed event: a known kind's, or :class:`~robotlab.streaming.OtherEvent` (an extension's kind).
StreamEvent = KnownEvent | OtherEvent

#: The class of every known kind, in :data:`~robotlab.streaming.ALL_EVENTS` order.
EVENT_TYPES: tuple[type[TypedEvent], ...] = (
    RunStarted, RunCompleted, RunFailed, RunInterrupted, StepStarted, StepCompleted, StepFailed, PartCreated,
    PartCompleted, PartFailed, ToolCallStarted, ToolCallCompleted, TextDelta, ToolCallArgumentsDelta,
    ToolCallOutputDelta, ReasoningDelta, DataDelta, HitlRequested, HitlResolved, UsageUpdated, MetadataUpdated,
    RunCancelled, StreamEnded)
