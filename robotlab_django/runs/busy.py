"""What a message does while its thread's reply is still running: the robot's on-busy policy, on every door.

Every door a person sends a message through (the chat page's POST, the thread websocket, ACP, A2A) queues it with
:func:`start_run` and hands it over with :func:`dispatch`, so one policy applies whichever door it came in by. The
policy is the robot's (or network's): ``ROBOTLAB["ROBOTS"][name]["on_busy"]``, else its registration's
``on_busy`` (:func:`robotlab_django.runs.thread_queue.on_busy`):

``"enqueue"`` (the default)
    The message waits behind the running reply and runs once it ends, with that reply in its history
    (:mod:`robotlab_django.runs.thread_queue`). The chat page says "queued behind the current reply".
``"reject"``
    The message is refused with :class:`ReplyRunningError` (nothing is written): an error frame on the socket, a
    409 on the page, ``invalid_input`` (409) on ACP, invalid params on A2A.
``"interrupt"``
    The running reply is cancelled, keeping the text it had streamed (its row's ``reply``, and the page's bubble),
    and the message runs at once. The cancelled reply is marked ``stop_reason = "interrupted"``, so later runs read
    it in their history: its user message and its partial text (:func:`robotlab_django.runs.history.load_history`).
``"steer"``
    The message is queued as for ``"enqueue"``, and the running reply takes it into its conversation at its next
    model call (:mod:`robotlab_django.runs.steering`); a message that comes too late for that runs after it.

A thread is busy while one of its replies is queued, running or retrying; a reply parked on a question is not
running, and a message then starts at once whatever the policy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction

from robotlab.errors import RobotLabError
from robotlab_django.abstract_models import Status
from robotlab_django.registry import registry
from robotlab_django.runs import control, executor, records, thread_queue
from robotlab_django.runs.history import INTERRUPTED
from robotlab_django.runs.user_errors import public_run_id

if TYPE_CHECKING:
    from django.contrib.auth.models import _AnyUser

    from robotlab_django.models import RobotResult
    from robotlab_django.runs.records import ThreadRef

__all__ = ["NOTICES", "ReplyRunningError", "Started", "dispatch", "start_run"]

#: What the chat page shows under a message that met a running reply, by policy.
NOTICES = {
    "enqueue": "queued behind the current reply",
    "steer": "sent to the current reply (it reads it at its next step)",
    "interrupt": "the reply before was stopped",
}


class ReplyRunningError(RobotLabError, ValueError):
    """A message to a robot whose on-busy policy is ``"reject"`` came while a reply of its thread runs.

    ``running`` is that reply's row.
    """

    def __init__(self, running: RobotResult) -> None:
        self.running = running
        super().__init__(f"A reply is still running on this thread (run {public_run_id(running)}); wait for it to "
                         "finish or cancel it, then send the message again.")


@dataclass(frozen=True)
class Started:
    """A message queued by :func:`start_run`: its row, its robot's policy, and the reply it met (if any)."""

    #: The message's run (``queued``).
    row: RobotResult
    #: The robot's on-busy policy.
    policy: str
    #: The thread's active reply when the message came (``None``: the thread was idle).
    behind: RobotResult | None = None

    @property
    def notice(self) -> str:
        """What the page says under the message: ``""`` when the thread was idle."""
        return NOTICES.get(self.policy, "") if self.behind is not None else ""

    def fields(self) -> dict[str, Any]:
        """What a door adds to its answer: ``{"on_busy", "behind" (the reply's result id), "notice"}``, or ``{}``."""
        if self.behind is None:
            return {}
        return {"on_busy": self.policy, "behind": self.behind.pk, "notice": self.notice}


def start_run(thread: ThreadRef, robot: object, message: object, *, user: _AnyUser | None = None,
              attachments: object = None, limit_rate: bool = False) -> Started:
    """Queue ``message`` on ``thread`` as :func:`robotlab_django.runs.records.start_run` does, under the policy.

    The thread's row is locked while its active reply is read and the run appended, so two messages sent at once
    meet each other. Hand the result to :func:`dispatch`.

    Raises:
        ReplyRunningError: the policy is ``"reject"`` and a reply of the thread is active (nothing is written).
        UnknownRobotError, ValueError, RateLimitedError: as :func:`~robotlab_django.runs.records.start_run`.
    """
    name = registry.resolve_runnable(robot).name
    policy = thread_queue.on_busy(name)
    with transaction.atomic():
        found = records.get_thread(thread, user=user)
        type(found).objects.select_for_update().filter(pk=found.pk).exists()  # two messages at once meet
        running = thread_queue.active_replies(found.pk).first()
        if running is not None and policy == "reject":
            raise ReplyRunningError(running)
        row = records.start_run(found, name, message, user=user, attachments=attachments, limit_rate=limit_rate)
    return Started(row, policy, running)


def dispatch(started: Started) -> None:
    """Hand the queued message to the executor; under ``"interrupt"``, cancel the replies before it first.

    Under ``"enqueue"`` and ``"steer"`` the executor holds it until the reply before it ends.
    """
    row = started.row
    if started.behind is not None and started.policy == "interrupt" and _interrupt(row):
        return  # the interrupted reply's runner dispatches it once it has stopped (robotlab_django.runs.thread_queue)
    executor.dispatch(row)


def _interrupt(row: RobotResult) -> bool:
    """Cancel the replies before ``row`` on its thread, newest first; whether a running one was among them.

    Each is marked ``stop_reason = "interrupted"`` first, so ``row`` is held until its runner has stopped and
    stored the text it keeps (a reply that ends meanwhile keeps its own stop reason).
    """
    model = type(row)
    earlier = list(thread_queue.active_replies(row.thread_id).filter(sequence_number__lt=row.sequence_number))
    running = False
    for reply in reversed(earlier):
        model.objects.filter(pk=reply.pk, status__in=thread_queue.ACTIVE).update(stop_reason=INTERRUPTED)
        try:
            control.cancel(reply, check_owner=False)  # it keeps the text it streamed
        except control.RunFinishedError:  # it ended meanwhile
            model.objects.filter(pk=reply.pk, stop_reason=INTERRUPTED).exclude(status=Status.CANCELLED).update(
                stop_reason="")
            continue
        running = running or reply.status == Status.RUNNING
    return running
