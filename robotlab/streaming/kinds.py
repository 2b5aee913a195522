"""The names of the event kinds: RobotLab's ``Streaming::Events``, one literal type and its tuples.

:data:`EventKind` is the one list; :data:`ALL_EVENTS`, :data:`LIFECYCLE_EVENTS` and :data:`DELTA_EVENTS` are read
from it, and every kind has its typed class in :mod:`robotlab.streaming.typed`.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = [
    "ALL_EVENTS",
    "DELTA_EVENTS",
    "HITL_REQUESTED",
    "HITL_RESOLVED",
    "LIFECYCLE_EVENTS",
    "RUN_CANCELLED",
    "RUN_COMPLETED",
    "RUN_FAILED",
    "RUN_STARTED",
    "STEP_COMPLETED",
    "STEP_FAILED",
    "STEP_STARTED",
    "STREAM_ENDED",
    "TEXT_DELTA",
    "TOOL_CALL_COMPLETED",
    "TOOL_CALL_STARTED",
    "USAGE_UPDATED",
    "DeltaKind",
    "EventKind",
    "LifecycleKind",
    "is_delta",
    "is_lifecycle",
    "is_valid",
]

#: Lifecycle events (RobotLab ``LIFECYCLE_EVENTS`` plus the tool-call pair this port emits).
LifecycleKind = Literal[
    "run.started",
    "run.completed",
    "run.failed",
    "run.interrupted",
    "step.started",
    "step.completed",
    "step.failed",
    "part.created",
    "part.completed",
    "part.failed",
    "tool_call.started",
    "tool_call.completed",
]
#: Delta events, which carry a piece of something growing.
DeltaKind = Literal[
    "text.delta",
    "tool_call.arguments.delta",
    "tool_call.output.delta",
    "reasoning.delta",
    "data.delta",
]
#: Every event kind: the value of :attr:`Event.kind`, which tells events apart.
EventKind = Literal[
    LifecycleKind,
    DeltaKind,
    "hitl.requested",
    "hitl.resolved",
    "usage.updated",
    "metadata.updated",
    "run.cancelled",
    "stream.ended",
]

#: ``run.started``: a run began.
RUN_STARTED: Final = "run.started"
#: ``run.completed``: a run ended with its reply.
RUN_COMPLETED: Final = "run.completed"
#: ``run.failed``: a run raised.
RUN_FAILED: Final = "run.failed"
#: ``text.delta``: a piece of the model's text.
TEXT_DELTA: Final = "text.delta"
#: ``tool_call.started``: a tool is about to run.
TOOL_CALL_STARTED: Final = "tool_call.started"
#: ``tool_call.completed``: a tool ran.
TOOL_CALL_COMPLETED: Final = "tool_call.completed"
#: ``usage.updated``: the run's token and cost totals after a model response.
USAGE_UPDATED: Final = "usage.updated"
#: ``hitl.requested``: a tool asked the person a question.
HITL_REQUESTED: Final = "hitl.requested"
#: ``hitl.resolved``: the question was answered, or it timed out or was cancelled.
HITL_RESOLVED: Final = "hitl.resolved"
#: ``run.cancelled``: the run was stopped.
RUN_CANCELLED: Final = "run.cancelled"
#: ``step.started``: a network's task began.
STEP_STARTED: Final = "step.started"
#: ``step.completed``: a network's task ended.
STEP_COMPLETED: Final = "step.completed"
#: ``step.failed``: a network's task failed.
STEP_FAILED: Final = "step.failed"
#: ``stream.ended``: the last event of a run's stream.
STREAM_ENDED: Final = "stream.ended"

#: Lifecycle events, as a tuple.
LIFECYCLE_EVENTS: tuple[str, ...] = get_args(LifecycleKind)
#: Delta events, as a tuple.
DELTA_EVENTS: tuple[str, ...] = get_args(DeltaKind)
#: Every event kind, as a tuple.
ALL_EVENTS: tuple[str, ...] = get_args(EventKind)


def is_lifecycle(kind: str) -> bool:
    """Whether ``kind`` is a lifecycle event."""
    return kind in LIFECYCLE_EVENTS


def is_delta(kind: str) -> bool:
    """Whether ``kind`` is a delta event."""
    return kind in DELTA_EVENTS


def is_valid(kind: str) -> bool:
    """Whether ``kind`` is a known event kind."""
    return kind in ALL_EVENTS
