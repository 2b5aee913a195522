"""Erasure of one user's content: the service, ``robotlab_erase``, the admin action and cascading user deletion.

Runs on SQLite, and on PostgreSQL with ``ROBOTLAB_TEST_DB=postgres``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import connections
from django.test import Client
from django.urls import reverse

from robotlab.streaming import Event
from robotlab.testing import FunctionLLM, text
from robotlab_django.models import RobotResult, RunEvent, RunStep, Status, Thread
from robotlab_django.privacy.erasure import erase_user, erasure_counts
from robotlab_django.runs import runner
from robotlab_django.runs.records import start_run
from robotlab_django.streaming.event_stream import persist_events

pytestmark = pytest.mark.django_db(transaction=True)


def _content(user: Any, threads: int = 2) -> None:
    """``threads`` threads of ``user``, each with a network turn (a task row under it), events and steps."""
    for number in range(threads):
        thread = Thread.objects.create(user=user, robot_name="echo", last_user_message=f"secret of {user}")
        turn = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name="net", input="private",
                                          status=Status.COMPLETED)
        task = RobotResult.objects.create(thread=thread, sequence_number=2, robot_name="echo", parent=turn,
                                          delegated_by="net", reply="private reply", status=Status.COMPLETED)
        persist_events(thread.pk, task.pk, [Event(kind="text.delta", run_id=task.run_id, seq=seq, ts=time.time(),
                                                  data={"text": "private"}) for seq in (1, 2, 3)])
        RunStep.objects.create(result=task, idx=0, kind="llm", fingerprint=f"f{number}", output={"x": "private"})


def _rows(user: Any) -> tuple[int, int, int, int]:
    return (Thread.objects.filter(user=user).count(), RobotResult.objects.filter(thread__user=user).count(),
            RunEvent.objects.filter(thread__user=user).count(),
            RunStep.objects.filter(result__thread__user=user).count())


@pytest.fixture
def ada() -> Any:
    return get_user_model().objects.create_user("ada", password="pw")


@pytest.fixture
def bob() -> Any:
    return get_user_model().objects.create_user("bob", password="pw")


def test_erase_user_deletes_every_row_of_the_users_content_in_batches(ada: Any, bob: Any) -> None:
    _content(ada, threads=3)
    _content(bob, threads=1)
    assert erasure_counts(ada).total == 3 + 6 + 9 + 3
    report = erase_user(ada, batch_size=2)
    assert (report.threads, report.results, report.events, report.steps) == (3, 6, 9, 3)
    assert _rows(ada) == (0, 0, 0, 0)
    assert _rows(bob) == (1, 2, 3, 1)  # nobody else's content
    assert get_user_model().objects.filter(pk=ada.pk).exists()  # the account stays


def test_the_command_counts_in_a_dry_run_then_erases(ada: Any, bob: Any) -> None:
    _content(ada)
    _content(bob)
    out = StringIO()
    call_command("robotlab_erase", "--user", "ada", "--dry-run", stdout=out)
    assert out.getvalue().strip() == "Would erase 2 thread(s), 4 result(s), 6 event(s) and 2 step(s) of user 'ada'."
    assert _rows(ada) == (2, 4, 6, 2)
    out = StringIO()
    call_command("robotlab_erase", "--user", "ada", "--batch-size", "1", stdout=out)
    assert out.getvalue().strip() == "Erased 2 thread(s), 4 result(s), 6 event(s) and 2 step(s) of user 'ada'."
    assert _rows(ada) == (0, 0, 0, 0) and _rows(bob) == (2, 4, 6, 2)


def test_the_command_names_what_was_wrong() -> None:
    with pytest.raises(CommandError, match="No user with username 'nobody'"):
        call_command("robotlab_erase", "--user", "nobody")
    with pytest.raises(CommandError, match="--batch-size must be at least 1"):
        call_command("robotlab_erase", "--user", "x", "--batch-size", "0")


def test_deleting_a_user_keeps_their_content_by_default(ada: Any) -> None:
    _content(ada)
    thread_ids = list(Thread.objects.filter(user=ada).values_list("pk", flat=True))
    ada.delete()
    assert Thread.objects.filter(pk__in=thread_ids, user__isnull=True).count() == 2


def test_erase_on_user_delete_cascades(ada: Any, bob: Any, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ERASE_ON_USER_DELETE": True}
    _content(ada)
    _content(bob)
    thread_ids = list(Thread.objects.filter(user=ada).values_list("pk", flat=True))
    ada.delete()
    assert not Thread.objects.filter(pk__in=thread_ids).exists()
    assert not RobotResult.objects.filter(thread_id__in=thread_ids).exists()
    assert not RunEvent.objects.filter(thread_id__in=thread_ids).exists()
    assert RunStep.objects.count() == 2  # bob's
    assert _rows(bob) == (2, 4, 6, 2)


def _admin(*perms: str) -> Client:
    root = get_user_model().objects.create_user("root", password="pw", is_staff=True)
    root.user_permissions.add(*Permission.objects.filter(content_type__app_label="robotlab", codename__in=perms))
    client = Client()
    client.force_login(root)
    return client


def test_the_admin_action_shows_the_counts_then_erases(ada: Any, bob: Any, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.robotlab_django.urls"
    _content(ada)
    _content(bob)
    client = _admin("view_thread", "delete_thread")
    url = reverse("admin:robotlab_thread_changelist")
    selected = [str(Thread.objects.filter(user=ada).first().pk)]
    form = {"action": "erase_owners", "_selected_action": selected}
    page = client.post(url, form)
    assert page.status_code == 200 and "Erase users&#x27; content?" in page.text
    assert "<td>ada</td><td>2</td><td>4</td><td>6</td><td>2</td>" in page.text.replace("\n", "")
    assert _rows(ada) == (2, 4, 6, 2)  # the first post only counts
    done = client.post(url, {**form, "post": "yes"}, follow=True)
    assert "Erased 2 thread(s), 4 result(s), 6 event(s) and 2 step(s) of user &#x27;ada&#x27;." in done.text
    assert _rows(ada) == (0, 0, 0, 0) and _rows(bob) == (2, 4, 6, 2)


def test_the_admin_action_needs_the_delete_permission(ada: Any, settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.robotlab_django.urls"
    _content(ada)
    client = _admin("view_thread")
    selected = [str(Thread.objects.filter(user=ada).first().pk)]
    response = client.post(reverse("admin:robotlab_thread_changelist"),
                           {"action": "erase_owners", "_selected_action": selected, "post": "yes"}, follow=True)
    assert "Erasing needs the thread model&#x27;s delete permission." in response.text
    assert _rows(ada) == (2, 4, 6, 2)


def test_erasing_a_user_cancels_their_runs_in_flight_and_waits_for_them_to_stop(
        ada: Any, postgres: None, settings: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Issue 25 item 11: a run streaming while its user is erased stops (no more model time) before its rows go.

    Before, the rows were deleted under the running worker: its model call went on to the end, and its writes
    failed (``IntegrityError``). On PostgreSQL: the run writes from its thread while this one erases.
    """
    in_call, outcome = threading.Event(), {}

    async def model(request: Any) -> Any:
        in_call.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            outcome["cancelled"] = True
            raise
        return text("finished after the erasure")

    llm = FunctionLLM(model)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm}
    thread = Thread.objects.create(user=ada, robot_name="echo")
    row = start_run(thread, "echo", "Write a lot")
    queued = start_run(thread, "echo", "And more")

    def work() -> None:
        try:
            outcome["row"] = runner.execute_run(row.pk, raise_errors=False)
        except BaseException as exc:  # asserted below
            outcome["error"] = exc
        finally:
            connections.close_all()

    worker = threading.Thread(target=work)
    worker.start()
    assert in_call.wait(10), "the run never called the model"
    with caplog.at_level(logging.WARNING, logger="robotlab_django"):
        report = erase_user(ada, stop_timeout=10)
    worker.join(10)
    assert not worker.is_alive()
    assert outcome.get("cancelled") is True and "error" not in outcome  # the model call stopped, no write failed
    assert outcome["row"].status == Status.CANCELLED
    assert report.cancelled == 2 and report.results == 2  # the running run and the queued one
    assert report.describe().startswith("Cancelled 2 run(s) in flight, then erased 1 thread(s), 2 result(s)")
    assert _rows(ada) == (0, 0, 0, 0) and len(llm.requests) == 1
    assert not RobotResult.objects.filter(pk__in=[row.pk, queued.pk]).exists()
    assert "IntegrityError" not in caplog.text and "did not stop" not in caplog.text
