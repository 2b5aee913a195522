"""Approving a tool call before it runs: a robot's ``approver``, and the approvers that come with robotlab.

A tool marked ``approve=True`` (``@robotlab.tool(approve=True)``, or ``approve = True`` on a
:class:`~robotlab.Tool` subclass) asks the ``approver`` of the robot whose run calls it before each call runs.
The approver receives an :class:`ApprovalRequest` (the tool, the model's arguments, the tool's
:meth:`~robotlab.Tool.approval_details` such as the before/after of a row) and answers with a :class:`Decision`,
or simply ``True`` / ``False``. An approved call runs; a denied one does not, and the model reads
``"denied by <who>"`` as the tool's result. An approver is any of:

* a function (or ``async`` function) of the request: ``robot.approver = lambda request: request.tool != "refund"``;
* an object with ``approve(request)`` or ``async aapprove(request)``;
* :class:`TerminalApprover`, which prints the proposed call and asks ``Approve? [y/N]``;
* :class:`ParkingApprover`, for servers: it answers from stored decisions and otherwise parks the run
  (:class:`~robotlab.tools.parking.RunParked`, as a parked question does) until a person decides.

A robot without an approver (``robot.approver`` is ``None``, the default) runs such tools as any other: the flag
is then only a record for hosts, as it was before approvers. Arguments that fail the tool's schema, and a tool whose
:meth:`~robotlab.Tool.approval_details` refuses the call (the row does not exist), fail as usual without asking.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..run_context import current_run_context
from ..streaming import HITL_REQUESTED, run_publisher
from .ask import AskRequest
from .parking import RunParked

if TYPE_CHECKING:
    from .base import Tool

__all__ = ["APPROVAL", "CHOICES", "ApprovalRequest", "Approver", "Decision", "ParkingApprover", "TerminalApprover",
           "approval_request", "approves", "decide", "screen"]

#: The ``type`` of a parked approval (``ApprovalRequest.to_dict()["type"]``), beside questions that have none.
APPROVAL = "approval"
#: The answers an approval takes, as the choices of its question.
CHOICES = ("approve", "deny")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


@dataclass(frozen=True)
class ApprovalRequest(AskRequest):
    """A proposed tool call waiting for a person's approval.

    It is a question (:class:`~robotlab.tools.ask.AskRequest`) with the choices ``approve`` and ``deny``, so a
    host that shows questions shows it too; its ``question`` says the call in words.

    Attributes:
        tool: The tool's name.
        arguments: The model's arguments, as it sent them (JSON).
        details: What the tool says about the call (:meth:`robotlab.Tool.approval_details`), e.g.
            ``{"changes": [{"field": "status", "before": "open", "after": "done"}]}``.
    """

    tool: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The question's payload plus ``type`` (``"approval"``), ``tool``, ``arguments`` and ``details``."""
        return {**super().to_dict(), "type": APPROVAL, "tool": self.tool, "arguments": dict(self.arguments),
                "details": dict(self.details)}


def approval_request(tool: str, arguments: Mapping[str, Any], details: Mapping[str, Any] | None = None, *,
                     robot: Any = None) -> ApprovalRequest:
    """The :class:`ApprovalRequest` of a call, its ``question`` written from the call and its changes.

    ``Approve update_note {"id": 3, "status": "done"}?``, then a line per change: ``status: "open" -> "done"``.
    """
    details = dict(details or {})
    lines = [f"Approve {tool} {_json(dict(arguments))}?"]
    for change in details.get("changes") or []:
        if isinstance(change, Mapping):
            lines.append(f"{change.get('field')}: {_json(change.get('before'))} -> {_json(change.get('after'))}")
    name = getattr(robot, "name", None)
    return ApprovalRequest(id=uuid.uuid4().hex, question="\n".join(lines), choices=CHOICES, default=None,
                           robot=None if name is None else str(name), tool=tool, arguments=dict(arguments),
                           details=details)


@dataclass(frozen=True)
class Decision:
    """An approver's answer.

    Attributes:
        approved: Whether the call may run.
        by: Who decided (a user name), for the model's ``"denied by <by>"``; may be empty.
    """

    approved: bool
    by: str = ""

    @property
    def denial(self) -> str:
        """What the model reads as the tool's result when the call was denied: ``"denied by <by>"``."""
        return f"denied by {self.by}" if self.by else "denied"


def _decision(value: Any) -> Decision:
    if isinstance(value, Decision):
        return value
    if isinstance(value, bool):
        return Decision(approved=value)
    raise TypeError(f"an approver returns a Decision or a bool, not {type(value).__name__}")


async def decide(approver: Any, request: ApprovalRequest) -> Decision:
    """Ask ``approver`` about ``request``: its ``aapprove``, its ``approve`` (in a worker thread) or itself.

    Raises:
        TypeError: the approver is none of those, or answered with something else than a ``Decision`` or a bool.
    """
    method = getattr(approver, "aapprove", None)
    if method is not None:
        return _decision(await method(request))
    method = getattr(approver, "approve", None)
    if method is None and callable(approver):
        method = approver
    if method is None:
        raise TypeError(f"an approver is a function of the request or has approve(); got {type(approver).__name__}")
    if inspect.iscoroutinefunction(method):
        return _decision(await method(request))
    value = await asyncio.to_thread(method, request)
    return _decision(await value if inspect.isawaitable(value) else value)


async def screen(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """Ask the run's approver about a call of ``tool`` (``tool.approve`` is set); ``None`` when it may run.

    The approver is the ``approver`` of the robot whose run is in progress, else of ``tool.robot``; without one,
    the call may run. Returns the text the model reads instead of the tool's result when the call was denied.

    Raises:
        ToolError: the tool's :meth:`~robotlab.Tool.approval_details` refused the call (it would fail anyway).
        RunParked: a :class:`ParkingApprover` parked the run until someone decides.
    """
    context = current_run_context()
    robot = context.robot if context is not None else tool.robot
    approver = getattr(robot, "approver", None)
    if approver is None and robot is not tool.robot:
        approver = getattr(tool.robot, "approver", None)
    if approver is None:
        return None
    details = await tool.approval_details(dict(arguments))
    decision = await decide(approver, approval_request(tool.name, arguments, details, robot=robot))
    return None if decision.approved else decision.denial


class TerminalApprover:
    """Asks on a text stream: prints the proposed call and reads ``y`` or ``n`` (anything else denies).

    Args:
        input: where answers are read (``robot.input``, else ``sys.stdin``, when not given).
        output: where the call is shown (``robot.output``, else ``sys.stdout``, when not given).
        by: Who answers, for the model's ``"denied by <by>"``.
    """

    def __init__(self, input: TextIO | None = None, output: TextIO | None = None, *, by: str = "the user") -> None:
        self.input = input
        self.output = output
        self.by = by

    def approve(self, request: ApprovalRequest) -> Decision:
        """Show ``request.question`` under the robot's name, ask ``Approve? [y/N]`` and read one line."""
        writer = self.output or sys.stdout
        reader = self.input or sys.stdin
        writer.write(f"\n[{request.robot or 'Robot'}] {request.question}\nApprove? [y/N] ")
        writer.flush()
        answer = (reader.readline() or "").strip().lower()
        return Decision(approved=answer in {"y", "yes"}, by=self.by)


_YES, _NO = {"approve", "approved", "yes", "y", "1"}, {"deny", "denied", "no", "n", "2"}


def approves(text: str) -> bool | None:
    """Whether an answer to an approval approves, denies, or neither (``None``).

    ``approve``, ``approved``, ``yes``, ``y`` and ``1`` approve; ``deny``, ``denied``, ``no``, ``n`` and ``2`` deny;
    case and surrounding spaces do not matter.
    """
    word = str(text).strip().lower()
    return True if word in _YES else False if word in _NO else None


class ParkingApprover:
    """An approver that answers from stored decisions and parks the run on a call nobody decided yet.

    A server stores the parked :class:`ApprovalRequest` (``RunParked.request``), and once a person decided, runs the
    robot again with a ``ParkingApprover`` holding the decision: the same call (same tool, same arguments) then
    gets it, in the order the decisions were made. A decision is a mapping with ``"type": "approval"``,
    ``"tool"``, ``"arguments"``, ``"answer"`` (``approve`` or ``deny``) and ``"by"``; other entries (the answers
    to questions) are ignored.

    Args:
        decisions: The decisions made so far, oldest first.
    """

    def __init__(self, decisions: Sequence[Mapping[str, Any]] = ()) -> None:
        self.decisions = [dict(entry) for entry in decisions if entry.get("type") == APPROVAL]
        self._used: set[int] = set()

    def approve(self, request: ApprovalRequest) -> Decision:
        """The stored decision on this call; without one, publish ``hitl.requested`` and raise ``RunParked``.

        It never waits, so it is safe on the event loop (:meth:`aapprove` is the same).
        """
        for index, entry in enumerate(self.decisions):
            if index in self._used or entry.get("tool") != request.tool:
                continue
            if entry.get("arguments") != dict(request.arguments):
                continue
            self._used.add(index)
            return Decision(approved=approves(str(entry.get("answer") or "")) is True, by=str(entry.get("by") or ""))
        stream = run_publisher()
        if stream is not None:
            stream(HITL_REQUESTED, request.to_dict())
        raise RunParked(request)

    async def aapprove(self, request: ApprovalRequest) -> Decision:
        """:meth:`approve` (it never waits)."""
        return self.approve(request)


#: What a robot's ``approver`` may be: a function of the request, or an object with ``approve``/``aapprove``.
Approver = Callable[[ApprovalRequest], Any] | TerminalApprover | ParkingApprover
