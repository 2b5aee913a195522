"""A task of a distributed network turn, seen from its job: its events, and its row's columns when it ends.

:mod:`robotlab_django.networks.distributed` runs one task per job; :func:`listener` numbers and filters the task's
events (its robot's ``run.*`` stand for nothing on a page: its ``step.*`` do), and keeps what its robots paid
(:func:`paid`), so a task that fails or is stopped still records every token it paid; :func:`task_fields` are
its row's columns when its task returned.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

from robotlab.result import RobotResult
from robotlab.robot import Robot
from robotlab.streaming import Event
from robotlab.task import FlowResult
from robotlab_django.abstract_models import Status
from robotlab_django.networks.task_events import TaskEvents
from robotlab_django.runs.records import outcome_fields, reply_text

__all__ = ["listener", "paid", "task_fields"]

def listener(sink: Callable[[Event], Any], base: int, inputs: dict[str, str],
             failures: dict[str, tuple[str, str]],
             usage: dict[str, dict[str, Any]] | None = None) -> Callable[[Event], None]:
    """A task's ``on_event``: its events rewritten (:class:`~.task_events.TaskEvents`) and numbered from ``base``.

    Its robot's ``run.*`` events are left out (its ``step.*`` stand for them, and record the robot's input and
    failure; a cancelled task's row gets its own ``run.cancelled`` when it stops). ``usage`` keeps each robot's last
    ``usage.updated`` (what its run has paid so far).
    """
    return TaskEvents(sink, inputs, failures, base=base, usage=usage, own_cancel=True)


def task_fields(network: str, flow: FlowResult, robot: object, history_length
: int, inputs: dict[str, str],
                 failures: dict[str, tuple[str, str]], elapsed: float) -> dict[str, Any]:
    """A task row's columns once its task returned ``flow`` (failed when its robot's run failed)."""
    value = flow.value
    messages = robot.messages[history_length:] if isinstance(robot, Robot) else []
    name = str(getattr(robot, "name", ""))
    if isinstance(value, RobotResult):
        fields = outcome_fields(value, messages=messages)
    else:
        fields = {"status": Status.COMPLETED, "reply": reply_text(value), "messages": messages}
    fields.update(input=inputs.get(name, ""), duration=elapsed, delegated_by=network)
    if name in failures:
        error, error_type = failures[name]
        fields.update(status=Status.FAILED, reply="", error=error, error_type=error_type)
    return fields


def paid(usage: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The row columns of what the robots of a task paid, from their last ``usage.updated`` events."""
    return {"input_tokens": sum(int(data.get("input_tokens") or 0) for data in usage.values()),
            "output_tokens": sum(int(data.get("output_tokens") or 0) for data in usage.values()),
            "cost": Decimal(str(sum(float(data.get("cost") or 0) for data in usage.values())))}
