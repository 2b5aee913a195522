"""One case replayed against a robot version: live through the app's executor, or offline from its recorded outputs.

Each replay runs on a thread of its own (``eval-<run>-<case>``) holding the case's history, as a row pinned to
the version, so it is stored, checkpointed and accounted like any run. Live, the configured executor runs it
(Celery workers when ``ROBOTLAB["EXECUTOR"]`` is ``"celery"``); offline, this process runs it with a
:class:`RecordedLLM` that answers with the case's recorded model responses, in order.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robotlab.llm.types import LLMRequest, LLMResponse, TextCallback, ToolCallRequest
from robotlab_django import swappable
from robotlab_django.abstract_models import Status
from robotlab_django.models import EvalCase, RobotVersion
from robotlab_django.runs import executor
from robotlab_django.runs.records import append_result, get_thread, start_run
from robotlab_django.runs.runner import execute_run

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["EVAL_THREAD_PREFIX", "CaseRun", "RecordedLLM", "RecordingExhaustedError", "replay_case",
           "tool_calls_of"]

#: The start of the session ids of the threads cases replay on (online evals leave their runs alone).
EVAL_THREAD_PREFIX = "eval-"

#: Seconds between the first reads of a live case's status, and the most between later ones.
POLL_FIRST, POLL_MOST = 0.05, 0.2
FINISHED = (Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.CANCELLED, Status.AWAITING)


class RecordingExhaustedError(RuntimeError):
    """The robot asked the model more often than the case recorded: the prompt or tools changed too much."""


class RecordedLLM:
    """An LLM that answers with recorded responses (``{"content", "tool_calls", "input_tokens", ...}``) in order."""

    def __init__(self, recorded: Sequence[Mapping[str, Any]]) -> None:
        self._recorded = list(recorded)
        self._lock = threading.Lock()

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """The next recorded response.

        Raises:
            RecordingExhaustedError: none is left.
        """
        with self._lock:
            if not self._recorded:
                raise RecordingExhaustedError("the case has no more recorded model outputs")
            output = self._recorded.pop(0)
        response = LLMResponse(
            content=output.get("content"), model=output.get("model") or request.model,
            finish_reason=output.get("finish_reason") or ("tool_calls" if output.get("tool_calls") else "stop"),
            input_tokens=int(output.get("input_tokens") or 0), output_tokens=int(output.get("output_tokens") or 0),
            cost=float(output.get("cost") or 0),
            tool_calls=[ToolCallRequest(id=str(call["id"]), name=str(call["name"]),
                                        arguments=call["arguments"] if isinstance(call["arguments"], str)
                                        else json.dumps(call["arguments"]))
                        for call in output.get("tool_calls") or []])
        if on_text is not None and response.content:
            on_text(response.content)
        return response


@dataclass
class CaseRun:
    """What one replay produced: the reply, the tools called, usage, latency, the stored row or the error."""

    reply: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    latency: float | None = None
    row: Any = None
    error: str = ""


def tool_calls_of(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tool calls in OpenAI-format ``messages``: ``{"name", "arguments"}`` each (arguments parsed)."""
    calls = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = function.get("arguments")
            calls.append({"name": function.get("name"), "arguments": arguments})
    return calls


def _queue(case: EvalCase, robot_name: str, version: RobotVersion | None, key: str) -> RobotResult:
    thread = get_thread(f"{EVAL_THREAD_PREFIX}{key}")
    if case.history:
        append_result(thread, robot_name=robot_name, status=Status.COMPLETED, messages=list(case.history))
    row = start_run(thread, robot_name, case.input or None)
    row.version = version
    type(row).objects.filter(pk=row.pk).update(version=version)
    return row


def _wait(pk: int, timeout: float) -> RobotResult:
    """The row once it finished (polled: a Celery worker runs it elsewhere), or as it is at the deadline.

    Only its status is read while it runs, every :data:`POLL_FIRST` seconds at first, then less often, up to
    every :data:`POLL_MOST` (``--concurrency`` threads wait at once: their queries were a core's fifth).
    """
    model = swappable.result_model()
    deadline = time.monotonic() + timeout
    pause, interval = threading.Event(), POLL_FIRST
    status = model.objects.filter(pk=pk).values_list("status", flat=True)
    while status.first() not in FINISHED and time.monotonic() < deadline:
        pause.wait(interval)
        interval = min(POLL_MOST, interval * 1.5)
    return model.objects.get(pk=pk)


def replay_case(case: EvalCase, robot_name: str, version: RobotVersion | None, *, key: str, offline: bool = False,
                timeout: float = 300.0) -> CaseRun:
    """Run ``case`` against ``robot_name`` at ``version`` (``None``: what the robot's rollout gives) and collect it.

    Args:
        case: The case.
        robot_name: The robot.
        version: The version pinned on the case's run.
        key: Names the case's thread (``eval-<key>``): unique per eval run and case.
        offline: Answer from the case's recorded model outputs, in this process.
        timeout: How long to wait for a live run.
    """
    started = time.monotonic()
    row = _queue(case, robot_name, version, key)
    if offline:
        execute_run(row.pk, llm=RecordedLLM(case.recorded), raise_errors=False)
    else:
        executor.dispatch(row)
    row = _wait(row.pk, timeout)
    error = row.error or ("" if row.status == Status.COMPLETED else f"the run is {row.status}")
    return CaseRun(reply=row.reply, tool_calls=tool_calls_of(row.messages or []), input_tokens=row.input_tokens,
                   output_tokens=row.output_tokens, cost=float(row.cost or 0),
                   latency=row.duration if row.duration is not None else time.monotonic() - started,
                   row=row, error=error)
