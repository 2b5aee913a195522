"""Parked questions: an ``AskUser`` that stops the run instead of waiting, for runs a server resumes later.

A :class:`ParkingChannel` is the ``ask_channel`` of a robot whose run must not hold a process while a
person thinks (a Django worker). When the model asks a question the channel has no answer for, it
publishes ``hitl.requested`` into the run's stream and raises :class:`RunParked`, which ends the run
(it is a :class:`BaseException`, so tools, hooks and networks that turn an ``Exception`` into an error
let it through). The caller stores the question; when the answer comes it runs the robot again with a
channel that holds the answer: the steps done before the question are replayed from their checkpoints
(or taken again) and the same question gets the stored answer (read by
:func:`robotlab.tools.ask.resolve_answer`: ``"2"`` picks the second choice, ``""`` the default).

Answers are matched to questions by their text, in order, so a run that asks the same question twice
gets the answers in the order they came.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..streaming import HITL_REQUESTED, run_publisher
from .ask import AskRequest, _choices, resolve_answer

if TYPE_CHECKING:
    from ..robot import Robot

__all__ = ["ParkingChannel", "RunParked"]


class RunParked(BaseException):  # noqa: N818 - a signal like asyncio.CancelledError, not an error
    """The run stopped to wait for a person's answer to ``request`` (raised by :class:`ParkingChannel`).

    Attributes:
        request: The question, its choices and default, and its ``request_id``.
    """

    def __init__(self, request: AskRequest) -> None:
        self.request = request
        super().__init__(f"waiting for an answer to {request.question!r}")


class ParkingChannel:
    """An ``ask_channel`` that answers from stored answers and parks the run on a new question.

    Args:
        answers: The answers given so far, oldest first: mappings with ``"question"`` and ``"answer"``.
    """

    def __init__(self, answers: Sequence[Mapping[str, Any]] = ()) -> None:
        self.answers = [dict(entry) for entry in answers]
        self._used: set[int] = set()

    def _stored(self, question: str) -> str | None:
        for index, entry in enumerate(self.answers):
            if index not in self._used and entry.get("question") == question:
                self._used.add(index)
                return str(entry.get("answer") or "")
        return None

    def ask(self, question: str, choices: Sequence[str] | None = None, default: str | None = None,
            robot: Robot | None = None) -> str:
        """The stored answer to ``question``; without one, publish ``hitl.requested`` and raise :class:`RunParked`.

        It never waits, so it is safe on the event loop (:meth:`aask` is the same).
        """
        stored = self._stored(str(question))
        if stored is not None:
            return resolve_answer(stored, choices, default)
        name = getattr(robot, "name", None)
        request = AskRequest(id=uuid.uuid4().hex, question=str(question),
                             choices=tuple(str(choice) for choice in _choices(choices)), default=default,
                             robot=None if name is None else str(name))
        stream = run_publisher()
        if stream is not None:
            stream(HITL_REQUESTED, request.to_dict())
        raise RunParked(request)

    async def aask(self, question: str, choices: Sequence[str] | None = None, default: str | None = None,
                   robot: Robot | None = None) -> str:
        """:meth:`ask` (it never waits)."""
        return self.ask(question, choices, default, robot)
