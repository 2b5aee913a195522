"""A run's stored events as AG-UI events, one stored event at a time, and the end of an AG-UI run from its row.

:class:`Translator` is fed the stored events of a run and of its network tasks' rows
(:func:`robotlab_django.protocols.runs.afollow_events`), each handled as
:data:`~robotlab_django.agui.events.AGUI_EVENTS` says, and returns the AG-UI events each becomes;
:meth:`Translator.finish` gives the end from the settled row. What it returns depends only on what it was fed, row by
row, so feeding the same stored events again (a reconnect, or the start of a resumed run) rebuilds it exactly:

- ids are made from stored data: a message's from the stored event that opened it (``rl-<cursor>``), a tool call's
  from the model's id, a task's subagent from the run and the task (``<run id>/<task>``);
- text goes into assistant messages, one per *part* (a row and a network task) at a time, ended by a tool call, its
  task's end or the run's end; a new attempt of a run (a lost worker's, or a run resumed after its question) that
  repeats text or tool calls already sent sends them no more (:class:`~robotlab_django.streaming.streamed_text.
  StreamedText` for text; text it says otherwise starts a new message, marked ``metadata.robotlab.replaces``);
- a network task is a subagent: ``SUBAGENT_STARTED`` and ``STEP_STARTED`` when it starts (or, in a resumed run, with
  its first event), and everything it streams carries its ``subagentRunId``;
- an AG-UI run ends with no message, tool call, step or subagent open, as the protocol asks: a parked run's open
  subagents are ``suspended``, and :meth:`Translator.suspend` is where the next AG-UI run of the same stored run
  starts from.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, assert_never

from robotlab.streaming import Dropped
from robotlab_django.abstract_models import Status
from robotlab_django.agui.events import AGUI_EVENTS, Agui
from robotlab_django.agui.wire import event, interrupt, run_uuid, usage
from robotlab_django.runs.user_errors import public_error
from robotlab_django.streaming.streamed_text import Chunk, Part, StreamedText, starts_attempt

if TYPE_CHECKING:
    from robotlab_django.models import RobotResult

__all__ = ["Translator"]

Events = list[dict[str, Any]]


def _order(message: str) -> tuple[int, str]:
    """The order of a message id: the stored event that opened it (``rl-<cursor>``), then the rest by name."""
    number = message.rpartition("-")[2]
    return (int(number), message) if number.isdigit() else (1 << 62, message)


class Translator:
    """The AG-UI events of one stored run (its row ``row``), fed its stored events in each row's order."""

    def __init__(self, row: RobotResult) -> None:
        self.row_pk = row.pk
        self.run_id = run_uuid(row)
        self._text = StreamedText(row.pk)
        self._open: dict[Part, str] = {}  # the open text message of each part
        self._anchor: dict[Part, tuple[str, bool]] = {}  # the message tool calls join, and whether its response ended
        self._attempts: dict[Any, int] = {}
        self._calls: dict[tuple[Any, str], tuple[str, int]] = {}  # (row, model's id) -> (AG-UI id, attempt)
        self._used: set[str] = set()
        self._results: set[str] = set()
        self._last_call: dict[Part, str] = {}
        self._questions: dict[str, tuple[str | None, str | None]] = {}  # request id -> (tool call, subagent)
        self._tasks: dict[str, str] = {}  # the open subagent of each task, in this AG-UI run
        self._ended: set[str] = set()  # the tasks ended in this AG-UI run
        self._rows: dict[str, Any] = {}  # the row each task's text is stored on

    def subagent(self, task: str) -> str | None:
        """The ``subagentRunId`` of the network task ``task`` (``None`` for the run's own events)."""
        return f"{self.run_id}/{task}" if task else None

    def feed(self, stored: Mapping[str, Any]) -> Events:
        """The AG-UI events of one stored event (its dict, with ``cursor`` and ``result_id``)."""
        handling = AGUI_EVENTS.get(str(stored.get("kind")))
        if handling is None or isinstance(handling, Dropped):
            return []
        row, task = stored.get("result_id"), str(stored.get("task") or "")
        part: Part = (row, task)
        out: Events = []
        match handling.action:
            case Agui.ATTEMPT:
                self._attempt(stored)
            case Agui.STEP_STARTED:
                self._attempt(stored)
                out += self._start_task(task, stored)
            case Agui.TEXT:
                out += self._start_task(task, stored)
                self._rows[task] = row
                for chunk in self._text.feed(stored):
                    out += self._chunk(part, chunk, stored)
            case Agui.RESPONSE:
                anchor = self._anchor.get(part)
                if anchor is not None and anchor[1]:
                    del self._anchor[part]
                elif anchor is not None:
                    self._anchor[part] = (anchor[0], True)
            case Agui.TOOL_CALL:
                out += self._start_task(task, stored)
                out += self._tool_call(part, stored)
            case Agui.TOOL_RESULT:
                out += self._start_task(task, stored)
                out += self._tool_result(part, stored)
            case Agui.STEP_ENDED:
                out += self._end_task(task, stored)
            case Agui.QUESTION:
                self._questions[str(stored.get("request_id") or "")] = (self._last_call.get(part),
                                                                         self._tasks.get(task))
            case _:
                assert_never(handling.action)
        return out

    def _attempt(self, stored: Mapping[str, Any]) -> None:
        self._text.feed(stored)
        if starts_attempt(stored, self.row_pk):
            row = stored.get("result_id")
            self._attempts[row] = self._attempts.get(row, 0) + 1

    def _start_task(self, task: str, stored: Mapping[str, Any]) -> Events:
        """``SUBAGENT_STARTED`` and ``STEP_STARTED`` of ``task`` unless it started or ended in this AG-UI run."""
        if not task or task in self._tasks or task in self._ended:
            return []
        subagent = str(self.subagent(task))
        self._tasks[task] = subagent
        robot = stored.get("robot")
        return [event("SUBAGENT_STARTED", subagentRunId=subagent, name=str(robot or task),
                      description=f"The task {task!r} of the network"),
                event("STEP_STARTED", stepName=task, subagentRunId=subagent)]

    def _end_texts(self, task: str | None = None) -> Events:
        """``TEXT_MESSAGE_END`` of the open messages (of ``task``'s parts only, when given)."""
        out: Events = []
        # in the order the messages were opened (by stored event), whichever order side-by-side rows were read in
        for part, message in sorted(self._open.items(), key=lambda item: _order(item[1])):
            if task is None or part[1] == task:
                del self._open[part]
                out.append(event("TEXT_MESSAGE_END", messageId=message, subagentRunId=self._tasks.get(part[1])))
        return out

    def _end_task(self, task: str, stored: Mapping[str, Any]) -> Events:
        if not task or task in self._ended:
            return []
        out = self._start_task(task, stored)  # a task resumed without a new event until its end
        out += self._end_texts(task)
        subagent = self._tasks.pop(task)
        self._ended.add(task)
        out.append(event("STEP_FINISHED", stepName=task, subagentRunId=subagent))
        if stored.get("kind") == "step.failed":
            out.append(event("SUBAGENT_ERROR", subagentRunId=subagent,
                             message=str(stored.get("error") or stored.get("reply") or "The task failed."),
                             code=str(stored.get("error_type") or "") or None))
        else:
            out.append(event("SUBAGENT_FINISHED", subagentRunId=subagent, result=stored.get("reply")))
        return out

    def _chunk(self, part: Part, chunk: Chunk, stored: Mapping[str, Any]) -> Events:
        out: Events = []
        subagent = self._tasks.get(part[1])
        if chunk.replace:
            out += [event("TEXT_MESSAGE_END", messageId=self._open.pop(part), subagentRunId=subagent)
                    ] if part in self._open else []
        if not chunk.text:
            return out
        message = self._open.get(part)
        if message is None:
            message = self._open[part] = f"rl-{stored.get('cursor')}"
            self._anchor[part] = (message, False)
            name = str(stored.get("robot") or "") if part[1] else ""
            out.append(event("TEXT_MESSAGE_START", messageId=message, role="assistant", name=name or None,
                             subagentRunId=subagent,
                             metadata={"robotlab": {"replaces": True}} if chunk.replace else None))
        out.append(event("TEXT_MESSAGE_CONTENT", messageId=message, delta=chunk.text, subagentRunId=subagent))
        return out

    def _tool_call(self, part: Part, stored: Mapping[str, Any]) -> Events:
        row, task = part
        raw = str(stored.get("id") or f"call-{stored.get('cursor')}")
        attempt = self._attempts.get(row, 0)
        known = self._calls.get((row, raw))
        out = self._end_texts(task) if part in self._open else []
        if known is not None and known[1] < attempt:  # a new attempt repeats a call an earlier one sent
            self._calls[(row, raw)] = (known[0], attempt)
            self._last_call[part] = known[0]
            return out
        call = raw if row == self.row_pk or not task else f"{raw}@{task}"
        call = f"{call}-{stored.get('cursor')}" if call in self._used else call
        self._used.add(call)
        self._calls[(row, raw)] = (call, attempt)
        self._last_call[part] = call
        anchor = self._anchor.get(part)
        if anchor is None:  # the client makes an assistant message named after the call; the next calls join it
            self._anchor[part] = (call, True)
        subagent = self._tasks.get(task)
        arguments = stored.get("arguments")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False,
                                                                         default=str)
        return out + [event("TOOL_CALL_START", toolCallId=call, toolCallName=str(stored.get("name") or "tool"),
                            parentMessageId=anchor[0] if anchor else None, subagentRunId=subagent),
                      event("TOOL_CALL_ARGS", toolCallId=call, delta=text, subagentRunId=subagent),
                      event("TOOL_CALL_END", toolCallId=call, subagentRunId=subagent)]

    def _tool_result(self, part: Part, stored: Mapping[str, Any]) -> Events:
        raw = str(stored.get("id") or "")
        known = self._calls.get((part[0], raw))
        call = known[0] if known is not None else raw
        if call in self._results:  # a new attempt's repeat of a result already sent
            return []
        self._results.add(call)
        return [event("TOOL_CALL_RESULT", messageId=f"rl-{stored.get('cursor')}", toolCallId=call,
                      content=str(stored.get("result") or ""), role="tool", subagentRunId=self._tasks.get(part[1]),
                      metadata={"robotlab": {"isError": True}} if stored.get("is_error") else None)]

    def suspend(self) -> None:
        """Forget what is open: where the next AG-UI run of this stored run starts (the last one ended parked)."""
        self._open.clear()
        self._anchor.clear()
        self._tasks.clear()
        self._ended.clear()

    def _close_tasks(self, outcome: str, question: str | None = None) -> Events:
        """The ends of the open tasks: ``suspended`` (a parked run), ``success``, ``cancelled`` or ``failed``."""
        out: Events = []
        for task, subagent in sorted(self._tasks.items()):
            out.append(event("STEP_FINISHED", stepName=task, subagentRunId=subagent))
            if outcome == "suspended":
                mine = question is not None and self._questions.get(question, (None, None))[1] == subagent
                out.append(event("SUBAGENT_FINISHED", subagentRunId=subagent,
                                 outcome={"type": "suspended", **({"interruptIds": [question]} if mine else {})}))
            elif outcome == "success":
                out.append(event("SUBAGENT_FINISHED", subagentRunId=subagent))
            else:
                message = "The run was cancelled." if outcome == "cancelled" else "The run failed."
                out.append(event("SUBAGENT_ERROR", subagentRunId=subagent, message=message, code=outcome))
            self._ended.add(task)
        self._tasks.clear()
        return out

    def finish(self, row: RobotResult, thread_id: str, run_id: str) -> Events:
        """The end of the AG-UI run ``run_id`` on ``thread_id`` from the settled ``row``.

        ``RUN_FINISHED`` (outcome ``success`` with the reply as its result; ``interrupt`` with the parked question;
        ``cancelled``) or ``RUN_ERROR`` (a failed or skipped run), after the ends of whatever is open.
        """
        if row.status == Status.AWAITING:
            question = dict(row.question or {})
            request = str(question.get("request_id") or "")
            call, subagent = self._questions.get(request, (None, None))
            out = self._end_texts() + self._close_tasks("suspended", request)
            parked = interrupt(question, tool_call_id=call, subagent=subagent, run_id=self.run_id)
            return out + [event("RUN_FINISHED", threadId=thread_id, runId=run_id,
                                outcome={"type": "interrupt", "interrupts": [parked]})]
        out = []
        for chunk in sorted(self._text.close()):  # a lost worker's last attempt said less than was sent
            part = (self._rows.get(chunk.task, row.pk), chunk.task)
            out += self._chunk(part, chunk, {"cursor": f"end-{part[0]}-{chunk.task}"})
        out += self._end_texts()
        if row.status == Status.COMPLETED:
            return out + self._close_tasks("success") + [
                event("RUN_FINISHED", threadId=thread_id, runId=run_id, outcome={"type": "success"},
                      result=row.reply, usage=usage(row))]
        if row.status == Status.CANCELLED:
            return out + self._close_tasks("cancelled") + [
                event("RUN_FINISHED", threadId=thread_id, runId=run_id, outcome={"type": "cancelled"},
                      usage=usage(row))]
        error_type, message = public_error(row.error_type, row.error, row.error_kind)
        return out + self._close_tasks("failed") + [
            event("RUN_ERROR", message=message or "The run failed.", code=row.error_kind or error_type or "run_failed",
                  usage=usage(row))]
