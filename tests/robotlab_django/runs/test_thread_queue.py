"""One reply at a time per thread, and where a robot's on-busy policy comes from."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import Error
from django.utils import timezone

from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.abstract_models import Status
from robotlab_django.checks import check_settings
from robotlab_django.models import RobotResult, RunEvent
from robotlab_django.registry import registry
from robotlab_django.runs import claims, control, executor, runner, thread_queue

pytestmark = pytest.mark.django_db


def _status(row: Any) -> str:
    return str(RobotResult.objects.get(pk=row.pk).status)


def test_a_reply_queued_behind_another_is_held_and_runs_once_that_one_ends(
        scripted_llm: Any) -> None:
    llm = scripted_llm(text("first"), text("second"))
    first = services.start_run("t", "echo", "one")
    second = services.start_run("t", "echo", "two")
    assert thread_queue.held(second.pk) and not thread_queue.held(first.pk)
    executor.dispatch(second)  # the sync executor would run it here: held, it does not
    assert _status(second) == Status.QUEUED and llm.requests == []
    executor.dispatch(first)  # runs, then releases the one behind it
    assert (_status(first), _status(second)) == (Status.COMPLETED, Status.COMPLETED)
    assert [m["content"] for m in llm.requests[1].messages[1:]] == ["one", "first", "two"]


def test_a_parked_reply_does_not_hold_the_thread_and_other_threads_never_do() -> None:
    first = services.start_run("t", "echo", "one")
    other = services.start_run("elsewhere", "echo", "hi")
    second = services.start_run("t", "echo", "two")
    assert thread_queue.held(second.pk) and not thread_queue.held(other.pk)
    RobotResult.objects.filter(pk=first.pk).update(status=Status.AWAITING)
    assert not thread_queue.held(second.pk) and thread_queue.next_waiting(first.thread_id) == second.pk


def test_next_waiting_is_none_while_the_oldest_reply_runs() -> None:
    first = services.start_run("t", "echo", "one")
    services.start_run("t", "echo", "two")
    assert thread_queue.next_waiting(first.thread_id) == first.pk
    assert claims.claim(first)
    assert thread_queue.next_waiting(first.thread_id) is None


def test_cancelling_a_queued_reply_releases_the_one_behind_it(scripted_llm: Any) -> None:
    scripted_llm(text("second"))
    first = services.start_run("t", "echo", "one")
    second = services.start_run("t", "echo", "two")
    executor.dispatch(second)
    assert _status(second) == Status.QUEUED
    control.cancel(first, check_owner=False)
    assert _status(second) == Status.COMPLETED


def test_an_interrupted_reply_holds_the_next_until_its_runner_stopped_or_the_grace_ran_out() -> None:
    first = services.start_run("t", "echo", "one")
    second = services.start_run("t", "echo", "two")
    RobotResult.objects.filter(pk=first.pk).update(status=Status.CANCELLED, stop_reason="interrupted",
                                                   finished_at=timezone.now())
    assert thread_queue.held(second.pk)  # its runner is still stopping
    RunEvent.objects.create(result=first, thread_id=first.thread_id, run_id=first.run_id, seq=1, ts=0.0,
                            kind="stream.ended", data={})
    assert not thread_queue.held(second.pk)
    RunEvent.objects.all().delete()
    long_ago = timezone.now() - timedelta(seconds=thread_queue.STOP_GRACE + 1)
    RobotResult.objects.filter(pk=first.pk).update(finished_at=long_ago)
    assert not thread_queue.held(second.pk)  # a lost worker never stops it: the next reply does not wait forever


def test_the_policy_is_the_settings_then_the_registration_then_enqueue(settings: Any, clean_registry: None) -> None:
    assert thread_queue.on_busy("echo") == "enqueue"
    registry.register(lambda **options: None, name="strict", on_busy="reject")
    assert thread_queue.on_busy("strict") == "reject"

    class Polite:
        name = "polite"
        on_busy = "interrupt"

        @classmethod
        def build(cls, **options: Any) -> Any:
            return None

    registry.register(Polite)
    assert thread_queue.on_busy("polite") == "interrupt"
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {"strict": {"on_busy": "steer"}}}
    assert thread_queue.on_busy("strict") == "steer"  # the settings win
    with pytest.raises(ValueError, match="on_busy is 'later'; choose one of: enqueue, reject, interrupt, steer"):
        registry.register(lambda **options: None, name="bad", on_busy="later")


def test_a_network_cannot_steer(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "NETWORKS": {"helpdesk": {"on_busy": "steer"}}}
    assert registry.is_network("helpdesk")
    assert thread_queue.on_busy("helpdesk") == "enqueue"


def test_a_settings_entry_with_options_only_registers_no_robot(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {
        "echo": {"on_busy": "reject"},
        "echo2": {"factory": "tests.robotlab_django.robotapp.robots.echo_robot.EchoRobot", "on_busy": "reject"}}}
    assert "echo2" in registry.names() and registry.names().count("echo") == 1
    assert registry.get("echo2").on_busy is None  # the factory's own; the setting is read by on_busy()
    assert thread_queue.on_busy("echo2") == "reject"
    assert services.build_robot("echo2", llm=FakeLLM([])).name == "echo"


@pytest.mark.parametrize(("entry", "problem"), [
    ({"on_busy": "later"}, "on_busy is 'later'; choose one of: enqueue, reject, interrupt, steer"),
    ({"on_busy": "reject", "timeout": 3}, "unknown options ['timeout'] (the options are factory, on_busy)"),
    ({"factory": 3}, "its factory 3 is neither a dotted path nor a callable"),
    (3, "3 is neither a dotted path, a callable nor a dict of options"),
])
def test_a_bad_settings_entry_is_a_check_error(settings: Any, entry: Any, problem: str) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ROBOTS": {"echo": entry}}
    errors = [message for message in check_settings(None) if isinstance(message, Error)]
    assert len(errors) == 1 and errors[0].id == "robotlab.E002" and problem in errors[0].msg


def test_a_job_skips_a_held_reply_and_the_job_that_ends_a_reply_dispatches_the_next(scripted_llm: Any) -> None:
    scripted_llm(text("first"), text("second"))
    first = services.start_run("t", "echo", "one")
    second = services.start_run("t", "echo", "two")
    assert runner.deliver(second.pk)["skipped"] is True  # a delivery of a held reply (a re-queue) waits its turn
    assert _status(second) == Status.QUEUED
    assert runner.deliver(first.pk)["status"] == Status.COMPLETED  # a Celery job's path: it releases the next
    assert _status(second) == Status.COMPLETED
