"""Side effects exactly once (issue 27, item 5): every call of a side-effecting tool is journaled before it runs.

A lost worker is played the way it leaves a run: the model fails at a later step (:class:`Killed`, after the tool
returned), or the tool itself never returns (:class:`WorkerDied`, a ``BaseException`` that nothing turns into a tool
error); the row is then set ``retrying`` and executed again, as :func:`robotlab_django.runs.runner.deliver` does for
a retry. The tests use ``transaction=True``: checkpoints and the journal are stored as a worker stores them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction
from django.db.models.signals import post_save
from django.utils import timezone

import robotlab
from robotlab.testing import FakeLLM, raise_, text, tool_call
from robotlab_django import services
from robotlab_django.models import RobotResult, RunEvent, RunStep, Status, Thread, ToolEffect
from robotlab_django.privacy.erasure import erase_user
from robotlab_django.privacy.retention import prune_threads
from robotlab_django.registry import registry
from robotlab_django.runs import control, effect_control
from robotlab_django.tools import model_tools
from tests.robotlab_django.notesapp.models import Note

pytestmark = pytest.mark.django_db(transaction=True)


class Killed(RuntimeError):
    """Stands for the worker dying at this model call."""


class WorkerDied(BaseException):  # noqa: N818 - stands for a SIGKILL, not an error
    """Stands for the worker dying inside the tool."""


class Outbox:
    """The mails the ``mailer`` robot's tool sent, and what it does next time (``die`` or ``fail``)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.seen_while_running: list[str] = []
        self.die = False
        self.fail = False

    def send(self, to: str) -> dict[str, Any]:
        self.seen_while_running += list(ToolEffect.objects.values_list("status", flat=True))
        if self.fail:
            raise ValueError("the mail server refused it")
        self.sent.append(to)
        if self.die:
            self.die = False
            raise WorkerDied("-9")
        return {"sent": to, "count": len(self.sent)}


@pytest.fixture
def outbox(clean_registry: None) -> Outbox:
    """The ``mailer`` robot: ``send_mail`` has a side effect, ``lookup`` has none, ``refund`` waits for approval."""
    box = Outbox()

    @robotlab.tool(side_effect=True)
    def send_mail(to: str) -> dict[str, Any]:
        """Send a mail.

        Args:
            to: To whom.
        """
        return box.send(to)

    @robotlab.tool
    def lookup(who: str) -> str:
        """Look an address up.

        Args:
            who: Whose.
        """
        return f"{who}@example.com"

    @robotlab.tool(side_effect=True, approve=True)
    def refund(order: str) -> str:
        """Refund an order.

        Args:
            order: Which.
        """
        box.sent.append(f"refund {order}")
        return f"{order} refunded"

    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="mailer", system_prompt="You send mails.", local_tools=[send_mail, lookup, refund],
                              **options)

    registry.register(build, name="mailer", replace=True)
    return box


@pytest.fixture
def alice() -> Any:
    """The thread owner."""
    return get_user_model().objects.create_user("alice")


def _thread(owner: Any) -> Any:
    return services.get_thread("s-effects", user=owner)


def _retrying(row: Any) -> None:
    RobotResult.objects.filter(pk=row.pk).update(status=Status.RETRYING)


def test_a_side_effecting_call_is_journaled_before_it_runs_and_completed_after(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    llm = scripted_llm(tool_call("lookup", who="ada"), tool_call("send_mail", to="ada@example.com", id="call-9"),
                       text("Sent."))
    row = services.run_robot(_thread(alice), "mailer", "Mail ada")
    assert row.status == Status.COMPLETED and outbox.sent == ["ada@example.com"]
    assert outbox.seen_while_running == ["started"]  # stored, and committed, before the tool ran
    effect = ToolEffect.objects.get()  # lookup has no side effect: no row
    assert (effect.key, effect.step, effect.call_id) == (f"{row.pk}:3:call-9", 3, "call-9")  # run, step, call id
    assert (effect.status, effect.tool_name, effect.robot_name, effect.user, effect.run_id) == (
        "completed", "send_mail", "mailer", alice, row.run_id)
    assert effect.arguments == {"to": "ada@example.com"} and effect.attempts == 1 and not effect.atomic
    assert effect.result == {"json": '{"sent": "ada@example.com", "count": 1}'} and effect.finished_at is not None
    assert llm.requests[2].messages[-1]["content"] == '{"sent": "ada@example.com", "count": 1}'


def test_a_retry_that_meets_a_completed_effect_reads_its_result_and_never_calls_the_tool_again(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    first = scripted_llm(tool_call("send_mail", to="ada"), raise_(Killed("-9")))
    row = services.run_robot(_thread(alice), "mailer", "Mail ada", raise_errors=False)
    assert row.error_type == "Killed" and outbox.sent == ["ada"]
    # the worker died after the effect was stored and before its step was: only the journal knows
    RunStep.objects.filter(result=row, kind="tool").delete()
    _retrying(row)
    again = scripted_llm(text("Sent."))
    done = services.execute_run(row.pk)
    assert done.status == Status.COMPLETED and done.reply == "Sent."
    assert outbox.sent == ["ada"]  # never called again
    assert again.requests[0].messages == first.requests[1].messages  # the model read the stored result
    assert ToolEffect.objects.get().attempts == 1


def test_a_failed_call_is_journaled_failed_and_its_error_replayed(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    outbox.fail = True
    scripted_llm(tool_call("send_mail", to="ada"), raise_(Killed("-9")))
    row = services.run_robot(_thread(alice), "mailer", "Mail ada", raise_errors=False)
    effect = ToolEffect.objects.get()
    assert effect.status == "failed" and effect.error == "ValueError: the mail server refused it"
    assert effect.result == {"json": "\"Error (send_mail): the mail server refused it\""}
    RunStep.objects.filter(result=row, kind="tool").delete()
    _retrying(row)
    outbox.fail = False
    again = scripted_llm(text("It failed."))
    assert services.execute_run(row.pk).status == Status.COMPLETED and outbox.sent == []
    assert again.requests[0].messages[-1]["content"] == "Error (send_mail): the mail server refused it"


def _died_inside_the_tool(scripted_llm: Callable[..., FakeLLM], outbox: Outbox, owner: Any) -> tuple[Any, Any]:
    """A run whose worker died inside ``send_mail``, executed again: ``(its row, now awaiting; the effect)``."""
    outbox.die = True
    scripted_llm(tool_call("send_mail", to="ada"))
    row = services.start_run(_thread(owner), "mailer", "Mail ada")
    with pytest.raises(WorkerDied):
        services.execute_run(row.pk)
    assert ToolEffect.objects.get().status == "started" and outbox.sent == ["ada"]
    _retrying(row)
    parked = services.execute_run(row.pk)
    return parked, ToolEffect.objects.get()


def test_a_retry_that_meets_a_started_effect_parks_the_run_with_an_unknown_outcome(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    row, effect = _died_inside_the_tool(scripted_llm, outbox, alice)
    assert outbox.sent == ["ada"]  # not repeated
    assert row.status == Status.AWAITING and effect.status == "unknown"
    assert "An effect's outcome is unknown" in row.question["question"] and row.question["effect"] == effect.pk
    assert "worker stopped before it returned" in effect.error
    requested = RunEvent.objects.filter(result_id=row.pk, kind="hitl.requested").get()
    assert requested.data["effect"] == effect.pk
    # an answer from the chat page does not settle it: the run parks again
    scripted_llm()
    again = control.answer(row, "it was sent", alice)
    assert again.status == Status.AWAITING and outbox.sent == ["ada"]


def test_marked_done_in_the_admin_the_run_goes_on_with_the_given_result(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    row, effect = _died_inside_the_tool(scripted_llm, outbox, alice)
    staff = get_user_model().objects.create_user("staff", is_staff=True)
    with pytest.raises(effect_control.EffectResolutionError, match="may not resolve"):
        effect_control.mark_done(effect, "sent", staff)
    staff.user_permissions.add(Permission.objects.get(codename="change_tooleffect"))
    staff = get_user_model().objects.get(pk=staff.pk)
    llm = scripted_llm(text("Sent."))
    done = effect_control.mark_done(effect, "sent by hand", staff)  # the sync executor resumes it here
    assert done.status == Status.COMPLETED and done.reply == "Sent." and outbox.sent == ["ada"]
    assert llm.requests[0].messages[-1]["content"] == "sent by hand"
    effect.refresh_from_db()
    assert (effect.status, effect.resolved_by, effect.attempts) == ("completed", staff, 1)
    with pytest.raises(effect_control.EffectResolutionError, match="not of unknown outcome"):
        effect_control.retry(effect, staff)


def test_retried_in_the_admin_the_tool_runs_again(scripted_llm: Callable[..., FakeLLM], outbox: Outbox,
                                                   alice: Any) -> None:
    row, effect = _died_inside_the_tool(scripted_llm, outbox, alice)
    llm = scripted_llm(text("Sent again."))
    done = effect_control.retry(effect, check=False)
    assert done.status == Status.COMPLETED and outbox.sent == ["ada", "ada"]  # a person chose to send it again
    assert llm.requests[0].messages[-1]["content"] == '{"sent": "ada", "count": 2}'
    effect.refresh_from_db()
    assert (effect.status, effect.attempts) == ("completed", 2)


def test_a_resolved_effect_whose_run_stopped_waiting_queues_nothing(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    row, effect = _died_inside_the_tool(scripted_llm, outbox, alice)
    control.cancel(row, alice)
    assert effect_control.mark_done(effect, "sent", check=False) is None
    assert RobotResult.objects.get(pk=row.pk).status == Status.CANCELLED
    assert ToolEffect.objects.get().status == "completed"


def test_a_call_waiting_for_approval_is_journaled_once_it_is_decided(
        scripted_llm: Callable[..., FakeLLM], outbox: Outbox, alice: Any) -> None:
    scripted_llm(tool_call("refund", order="A-1"))
    row = services.run_robot(_thread(alice), "mailer", "Refund A-1")
    assert row.status == Status.AWAITING and ToolEffect.objects.count() == 0  # parked before it ran: no effect
    scripted_llm(text("Refunded."), tool_call("refund", order="A-2"))
    assert control.decide(row, True, alice).status == Status.COMPLETED
    effect = ToolEffect.objects.get()
    assert (effect.status, effect.result, outbox.sent) == ("completed", {"json": '"A-1 refunded"'}, ["refund A-1"])
    # a denied call did not run: its row says so, and a retry replays the denial
    row = services.run_robot(_thread(alice), "mailer", "Refund A-2")
    scripted_llm(text("Not refunded."))
    assert control.decide(row, False, alice).status == Status.COMPLETED
    denied = ToolEffect.objects.exclude(pk=effect.pk).get()
    assert (denied.status, denied.result, outbox.sent) == ("denied", {"json": '"denied by alice"'}, ["refund A-1"])


def _notes_robot(*, add: bool) -> Any:
    """The ``notes`` robot (model tools on Note, writes without approval) and bob, who may add notes if ``add``."""
    tools = model_tools(Note, fields=["title", "status"], owner_field="owner", write=True, approve=False)
    registry.register(lambda **options: robotlab.build(name="notes", local_tools=tools, **options), name="notes",
                      replace=True)
    bob = get_user_model().objects.create_user("bob")
    if add:
        bob.user_permissions.add(Permission.objects.get(codename="add_note"))
    return bob


def test_a_model_tools_write_commits_with_its_effect_and_a_rolled_back_one_runs_again(
        scripted_llm: Callable[..., FakeLLM], clean_registry: None) -> None:
    bob = _notes_robot(add=True)
    scripted_llm(tool_call("create_note", title="milk"), raise_(Killed("-9")))
    row = services.run_robot(_thread(bob), "notes", "Note milk", raise_errors=False)
    effect = ToolEffect.objects.get()
    assert (effect.status, effect.atomic, effect.tool_name) == ("completed", True, "create_note")
    note = Note.objects.get()
    assert note.owner == bob and effect.result == {"json": f'{{"id": {note.pk}, "title": "milk", "status": "open"}}'}
    # as the journal sees a worker killed inside the write's transaction: nothing of it committed
    Note.objects.all().delete()
    ToolEffect.objects.update(status="started", result={}, finished_at=None)
    RunStep.objects.filter(result=row, kind="tool").delete()
    _retrying(row)
    scripted_llm(text("Noted."))
    assert services.execute_run(row.pk).status == Status.COMPLETED
    assert Note.objects.count() == 1  # written once, by the retry: a started atomic effect wrote nothing
    assert ToolEffect.objects.get().attempts == 2


def test_a_worker_killed_right_after_a_model_tools_write_committed_leaves_its_effect_completed(
        scripted_llm: Callable[..., FakeLLM], clean_registry: None) -> None:
    bob = _notes_robot(add=True)

    def die_after_commit(**kwargs: Any) -> None:
        def die() -> None:
            raise WorkerDied("-9")  # the moment after the commit, before the tool returned

        transaction.on_commit(die)

    post_save.connect(die_after_commit, sender=Note, dispatch_uid="die-after-commit")
    try:
        scripted_llm(tool_call("create_note", title="milk"))
        row = services.start_run(_thread(bob), "notes", "Note milk")
        with pytest.raises(WorkerDied):
            services.execute_run(row.pk)
    finally:
        post_save.disconnect(dispatch_uid="die-after-commit", sender=Note)
    assert ToolEffect.objects.get().status == "completed"  # committed with the note: no unknown outcome
    _retrying(row)
    scripted_llm(text("Noted."))
    assert services.execute_run(row.pk).status == Status.COMPLETED
    assert Note.objects.count() == 1 and ToolEffect.objects.get().attempts == 1  # never written again


def test_a_refused_model_tool_write_is_a_failed_effect_that_wrote_nothing(
        scripted_llm: Callable[..., FakeLLM], clean_registry: None) -> None:
    bob = _notes_robot(add=False)
    scripted_llm(tool_call("create_note", title="milk"), text("I may not."))
    services.run_robot(_thread(bob), "notes", "Note milk")
    effect = ToolEffect.objects.get()
    assert (effect.status, effect.atomic, Note.objects.count()) == ("failed", True, 0)
    assert effect.error == ("ToolError: refused: you may not add notes (this needs the permission "
                            "notesapp.add_note); nothing was changed")


def test_the_journal_goes_with_its_runs_on_erasure_and_retention(scripted_llm: Callable[..., FakeLLM],
                                                                   outbox: Outbox, alice: Any) -> None:
    scripted_llm(tool_call("send_mail", to="ada"), text("Sent."), tool_call("send_mail", to="bob"), text("Sent."))
    old = services.run_robot(services.get_thread("s-old"), "mailer", "Mail ada")
    services.run_robot(_thread(alice), "mailer", "Mail bob")
    assert ToolEffect.objects.count() == 2
    Thread.objects.filter(pk=old.thread_id).update(updated_at=timezone.now() - dt.timedelta(days=100))
    prune_threads(dt.timedelta(days=90))
    assert list(ToolEffect.objects.values_list("arguments", flat=True)) == [{"to": "bob"}]
    erase_user(alice)
    assert ToolEffect.objects.count() == 0
