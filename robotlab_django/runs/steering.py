"""Steering a running reply: messages sent to its thread meanwhile join its conversation at its next model call.

A robot whose on-busy policy is ``"steer"`` (:func:`robotlab_django.runs.thread_queue.on_busy`) runs with its LLM
wrapped in a :class:`SteeringLLM` (:func:`attach`, from :func:`robotlab_django.runs.runnables.prepare`). A message
sent while it runs is queued as a run of its own, held behind it (:mod:`robotlab_django.runs.thread_queue`); before
each model call the wrapper takes the held messages of the thread (:func:`absorb`) and appends them to the robot's
conversation as user messages, so the model reads them in order after what it did so far, and the run's stored
``messages`` (the thread's history) hold them where they were said. Each message taken ends as a ``completed`` run
with no reply of its own and ``stop_reason`` ``"steered"``; its ``run.completed`` says so, so a page shows it as
part of the running reply. A message with files, or one that comes after the run's last model call, is not taken:
it runs after the reply, as with ``"enqueue"``.

A run executed again after its worker was lost replays its stored model calls (:mod:`robotlab_django.runs.checkpoints`)
until the first one a steered message changed; that call and those after it are sent to the model again.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from robotlab.llm import LLM, AutoLLM, LLMClient, LLMRequest, LLMResponse, TextCallback
from robotlab.robot import Robot
from robotlab.streaming import RUN_COMPLETED, STREAM_ENDED
from robotlab_django.abstract_models import Status
from robotlab_django.runs import thread_queue
from robotlab_django.runs.sync_bridge import blocking
from robotlab_django.streaming.event_stream import apublish_events

__all__ = ["STEERED", "SteeringLLM", "absorb", "attach"]

#: The ``stop_reason`` of a message taken into a running reply.
STEERED = "steered"


def absorb(row: Any) -> list[Any]:
    """Take the messages waiting behind the running ``row`` on its thread; the rows taken, oldest first.

    A message is taken when it is a reply of the same robot queued after ``row`` with text and no files; taking it
    is one conditional update (a worker that delivered it meanwhile would have claimed it first).
    """
    model = type(row)
    waiting = (thread_queue.active_replies(row.thread_id)
               .filter(sequence_number__gt=row.sequence_number, status=Status.QUEUED, robot_name=row.robot_name,
                       attachments=[])
               .exclude(input=""))
    taken = []
    for candidate in waiting:
        now = timezone.now()
        if model.objects.filter(pk=candidate.pk, status=Status.QUEUED).update(
                status=Status.COMPLETED, stop_reason=STEERED, started_at=now, finished_at=now, updated_at=now):
            candidate.status, candidate.stop_reason = Status.COMPLETED, STEERED
            taken.append(candidate)
    return taken


class SteeringLLM:
    """An LLM that adds the messages steered into its run before each model call.

    Args:
        llm: The robot's LLM (its checkpoint and budget wrappers included).
        row: The run's result row.
        robot: The robot, whose conversation gets the messages.
    """

    def __init__(self, llm: LLM, row: Any, robot: Robot) -> None:
        self.llm = llm
        self.row = row
        self.robot = robot

    async def complete(self, request: LLMRequest, *, on_text: TextCallback | None = None) -> LLMResponse:
        """The inner LLM's answer to ``request`` plus the messages steered in since the last call."""
        taken = await blocking(absorb, self.row)
        if taken:
            added = [{"role": "user", "content": str(found.input)} for found in taken]
            self.robot.conversation.messages.extend(added)
            request = LLMRequest(model=request.model, messages=[*request.messages, *added], tools=request.tools,
                                 params=request.params)
            for found in taken:
                await apublish_events(found, [(RUN_COMPLETED, {"robot": found.robot_name, "reply": "",
                                                               "stop_reason": STEERED, "into": self.row.run_id}),
                                              (STREAM_ENDED, {})])
        return await self.llm.complete(request, on_text=on_text)


def attach(robot: Robot, row: Any) -> None:
    """Steer ``robot``'s run of ``row`` when its robot's policy is ``"steer"`` and ``row`` is a thread's reply.

    A robot with no model keeps its own LLM: it raises its "no model" ``ConfigurationError`` itself.
    """
    if robot.model is None and isinstance(robot.llm, LLMClient | AutoLLM):
        return
    if row.parent_id is None and not row.delegated_by and thread_queue.on_busy(row.robot_name) == "steer":
        robot.llm = SteeringLLM(robot.llm, row, robot)
