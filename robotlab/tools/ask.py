"""Asking the person: the :class:`AskUser` tool, and where its questions go (the terminal, or a queue).

A robot's ``ask_channel`` decides (the terminal when it is not set). A channel is anything with the
:class:`AskChannel` methods: ``ask(question, choices, default, robot) -> str`` and its ``async`` form
``aask``. Two are built in:

* :class:`TerminalChannel` prints the question to ``robot.output`` and reads a line from
  ``robot.input`` (stdout and stdin when those are not set), exactly as RobotLab's ``AskUser`` does.
* :class:`QueueChannel` publishes each question (a ``hitl.requested`` payload given to a callback),
  then waits until someone calls :meth:`QueueChannel.answer` with its ``request_id``, for example a
  view handling the form a web page posted. No answer in time is a :class:`~robotlab.errors.ToolError`,
  which the model sees as the tool's error text::

      channel = QueueChannel(publish=lambda kind, data: print(kind, data), timeout=600)
      robot.ask_channel = channel
      # later, from any thread:
      channel.answer(request_id, "blue")

Asked inside a run that has listeners (``robot.run(..., on_event=...)``, ``robot.stream(...)``, a
network's ``on_event``), a :class:`QueueChannel` also puts both events into that run's stream, so a page
following the run sees the question and its resolution between the tool call's events.

Both read an answer the same way (:func:`resolve_answer`): an empty answer means the default (when
there is one) and a number from 1 to the number of choices means that choice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TextIO, runtime_checkable

from .. import _ruby
from ..errors import ToolError
from ..streaming import HITL_REQUESTED, HITL_RESOLVED, run_publisher

if TYPE_CHECKING:
    from ..robot import Robot

__all__ = [
    "AskChannel",
    "AskRequest",
    "Publisher",
    "QueueChannel",
    "TerminalChannel",
    "ask_via",
    "resolve_answer",
]

Publisher = Callable[[str, dict[str, Any]], Any]
"""Receives ``(kind, payload)``: ``"hitl.requested"`` or ``"hitl.resolved"`` and a JSON-ready dict."""

Stream = Publisher | None  # the asking run's stream (see robotlab.streaming.run_publisher)

_NUMBER = re.compile(r"[0-9]+")


@runtime_checkable
class AskChannel(Protocol):
    """Puts a question to a person and returns their answer."""

    def ask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Robot | None = None,
    ) -> str:
        """Ask and block until the answer comes."""
        ...

    async def aask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Robot | None = None,
    ) -> str:
        """Ask without blocking the event loop."""
        ...


def _choices(choices: object) -> list[Any]:
    """The choices when they are a list (as Ruby checks ``is_a?(Array)``), else none."""
    return list(choices) if isinstance(choices, list | tuple) else []


def resolve_answer(answer: str, choices: Sequence[Any] | None, default: str | None) -> str:
    """Read an answer as RobotLab's ``AskUser`` does.

    An empty answer becomes ``default`` when one is given (``""`` counts as given). An answer of
    ASCII digits from 1 to ``len(choices)`` becomes that choice; any other answer, a number out of
    range included, is returned as it is.
    """
    if answer == "" and default is not None:
        answer = default
    choices = _choices(choices)
    if choices and _NUMBER.fullmatch(answer):
        index = int(answer) - 1
        if 0 <= index < len(choices):
            return str(choices[index])
    return answer


def _robot_name(robot: object) -> str:
    name = getattr(robot, "name", None)
    return "Robot" if name is None else str(name)


async def ask_via(
    channel: AskChannel,
    question: str,
    choices: Sequence[str] | None = None,
    default: str | None = None,
    robot: Robot | None = None,
) -> str:
    """Ask through ``channel``: its ``aask`` when it has one, else its ``ask`` in a worker thread."""
    aask = getattr(channel, "aask", None)
    if aask is not None:
        return str(await aask(question, choices, default, robot))
    return str(await asyncio.to_thread(channel.ask, question, choices, default, robot))


class TerminalChannel:
    """Questions on a text stream: RobotLab's ``AskUser`` prompt, byte for byte.

    It writes ``"\\n[<robot name>] <question>"`` (``Robot`` when there is no name), one line per
    choice (``"  1. red"``), then the prompt ``"> [<default>] "`` or ``"> "``, and reads one line
    (end of input reads as ``""``).

    Args:
        input: where answers are read; by default ``robot.input``, else ``sys.stdin``.
        output: where questions are written; by default ``robot.output``, else ``sys.stdout``.
    """

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None) -> None:
        self.input = input
        self.output = output

    def _streams(self, robot: Robot | None) -> tuple[TextIO, TextIO]:
        reader = self.input if self.input is not None else getattr(robot, "input", None)
        writer = self.output if self.output is not None else getattr(robot, "output", None)
        return (sys.stdin if reader is None else reader), (sys.stdout if writer is None else writer)

    def ask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Robot | None = None,
    ) -> str:
        """Print the question, read one line and :func:`resolve_answer` it."""
        reader, writer = self._streams(robot)
        lines = [f"\n[{_robot_name(robot)}] {question}"]
        lines += [f"  {index}. {choice}" for index, choice in enumerate(_choices(choices), start=1)]
        writer.write(_ruby.puts(lines))
        writer.write("> " if default is None else f"> [{default}] ")
        writer.flush()
        line = reader.readline() or ""
        answer = line[:-2] if line.endswith("\r\n") else line[:-1] if line.endswith(("\n", "\r")) else line
        return resolve_answer(answer, choices, default)

    async def aask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Robot | None = None,
    ) -> str:
        """:meth:`ask` in a worker thread, so a waiting terminal never blocks the event loop."""
        return await asyncio.to_thread(self.ask, question, choices, default, robot)


@dataclass(frozen=True)
class AskRequest:
    """A question waiting in a :class:`QueueChannel`."""

    id: str
    question: str
    choices: tuple[str, ...] = ()
    default: str | None = None
    robot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``hitl.requested`` payload.

        ``request_id``, ``question``, ``choices``, ``default``, ``robot``.
        """
        return {
            "request_id": self.id,
            "question": self.question,
            "choices": list(self.choices),
            "default": self.default,
            "robot": self.robot,
        }


class QueueChannel:
    """Questions that wait for an answer delivered later with :meth:`answer` (a web page, an API client).

    Each question gets a ``request_id`` and is published as ``publish("hitl.requested",
    request.to_dict())``; when it is settled, ``publish("hitl.resolved", {"request_id", "answer",
    "status"})`` follows, with ``status`` ``"answered"``, ``"timed_out"`` (``answer`` ``None``) or
    ``"cancelled"`` (the waiting run was cancelled). :attr:`pending` lists the open questions, so a
    page that reloads can show them again. ``publish`` is called on the asking thread (or the
    answering one for ``hitl.resolved``) and must not block; if it raises, the question is withdrawn.
    A question asked inside a run with an ``on_event`` listener also goes into that run's stream, as
    ``hitl.requested`` and ``hitl.resolved`` events with the same payloads, sent by the asking side on the
    run's event loop (``hitl.requested`` after ``publish`` returned, ``hitl.resolved`` once the wait is
    over, so both come between the tool call's ``tool_call.started`` and ``tool_call.completed``).

    Args:
        publish: the callback, e.g. one that hands the question to a web page. Not needed to reach the
            asking run's own ``on_event`` stream, which gets the events anyway (see above).
        timeout: seconds to wait for each answer; ``None`` waits forever.

    Raises (from :meth:`ask` / :meth:`aask`):
        ToolError: no answer in time (``"No answer to 'Which plan?' after 300 seconds"``).
    """

    def __init__(self, publish: Publisher | None = None, *, timeout: float | None = 300.0) -> None:
        self.publish = publish
        self.timeout = timeout
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[AskRequest, concurrent.futures.Future[str]]] = {}

    @property
    def pending(self) -> list[AskRequest]:
        """The questions waiting for an answer, oldest first."""
        with self._lock:
            return [request for request, _ in self._pending.values()]

    def answer(self, request_id: str, text: str) -> bool:
        """Deliver the answer to a waiting question (from any thread); whether it was still waiting.

        The text is read by :func:`resolve_answer` (``"2"`` picks the second choice, ``""`` the default).

        Raises:
            TypeError: ``text`` is not a ``str``.
        """
        if not isinstance(text, str):
            raise TypeError(f"answer must be str, got {type(text).__name__}")
        with self._lock:
            entry = self._pending.pop(request_id, None)
            if entry is None:
                return False
            request, future = entry
            answer = resolve_answer(text, request.choices, request.default)
            future.set_result(answer)
        self._emit(HITL_RESOLVED, {"request_id": request_id, "answer": answer, "status": "answered"})
        return True

    def ask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Robot | None = None,
    ) -> str:
        """Publish the question and block this thread until it is answered."""
        request, future, stream = self._open(question, choices, default, robot)
        try:
            answer = future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            answer = self._expire(request, future, stream)
        except BaseException:
            self._abandon(request, future, stream)
            raise
        return self._answered(request, answer, stream)

    async def aask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Robot | None = None,
    ) -> str:
        """Publish the question and wait for the answer without blocking the event loop."""
        request, future, stream = self._open(question, choices, default, robot)
        try:
            done, _ = await asyncio.wait([asyncio.wrap_future(future)], timeout=self.timeout)
        except BaseException:
            self._abandon(request, future, stream)
            raise
        answer = future.result() if done else self._expire(request, future, stream)
        return self._answered(request, answer, stream)

    def _open(
        self, question: str, choices: Sequence[str] | None, default: str | None, robot: Robot | None
    ) -> tuple[AskRequest, concurrent.futures.Future[str], Stream]:
        name = getattr(robot, "name", None)
        request = AskRequest(
            id=uuid.uuid4().hex,
            question=str(question),
            choices=tuple(str(choice) for choice in _choices(choices)),
            default=default,
            robot=None if name is None else str(name),
        )
        future: concurrent.futures.Future[str] = concurrent.futures.Future()
        stream = run_publisher()  # the asking run's on_event stream, if anyone listens
        with self._lock:
            self._pending[request.id] = (request, future)
        try:
            self._emit(HITL_REQUESTED, request.to_dict())
        except BaseException:
            with self._lock:
                self._pending.pop(request.id, None)
            raise
        if stream is not None:  # after publish, and only from the asking side, so always in order
            stream(HITL_REQUESTED, request.to_dict())
        return request, future, stream

    @staticmethod
    def _resolved(stream: Stream, request: AskRequest, answer: str | None, status: str) -> None:
        if stream is not None:
            stream(HITL_RESOLVED, {"request_id": request.id, "answer": answer, "status": status})

    def _answered(self, request: AskRequest, answer: str, stream: Stream) -> str:
        self._resolved(stream, request, answer, "answered")
        return answer

    def _withdraw(self, request: AskRequest, status: str, stream: Stream) -> bool:
        """Drop a question that is still waiting and publish why; ``False`` when it was answered already."""
        with self._lock:
            if self._pending.pop(request.id, None) is None:
                return False
        self._emit(HITL_RESOLVED, {"request_id": request.id, "answer": None, "status": status})
        self._resolved(stream, request, None, status)
        return True

    def _abandon(self, request: AskRequest, future: concurrent.futures.Future[str], stream: Stream) -> None:
        """The asker stopped waiting (cancelled): withdraw the question, or report the answer that came."""
        if not self._withdraw(request, "cancelled", stream) and future.done():
            self._resolved(stream, request, future.result(), "answered")

    def _expire(self, request: AskRequest, future: concurrent.futures.Future[str], stream: Stream) -> str:
        if self._withdraw(request, "timed_out", stream):
            raise ToolError(f"No answer to {request.question!r} after {self.timeout:g} seconds")
        return future.result()  # answered just as the wait ended (set under the lock, so it is there)

    def _emit(self, kind: str, payload: dict[str, Any]) -> None:
        if self.publish is not None:
            self.publish(kind, payload)
