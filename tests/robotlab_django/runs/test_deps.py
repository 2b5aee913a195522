"""``robotlab_django.RunDeps``: the deps of every app run, whatever door queued it (issue 27, item 2).

The thread's owner is read from the database when the run executes (:func:`robotlab_django.runs.deps.for_row`): a
robot run through the services, an ACP run (the token's user: the protocol servers' threads are theirs), the admin's
re-run, a network turn in one process and a distributed one, a parked run resumed by its answer; a user deactivated
meanwhile stops the run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

import robotlab
import robotlab_django
from robotlab.network import create_network
from robotlab.testing import FakeLLM, text, tool_call
from robotlab.tools import AskUser
from robotlab_django import RunDeps, services
from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.registry import registry
from robotlab_django.runs import control, executor
from robotlab_django.runs.deps import InactiveUserError, for_row
from robotlab_django.runs.records import start_run

Script = Callable[..., FakeLLM]


def test_run_deps_is_a_frozen_dataclass_the_package_exports_lazily() -> None:
    deps = RunDeps(user=None, run_id="r")
    assert robotlab_django.RunDeps is RunDeps and "RunDeps" in robotlab_django.__all__
    assert (deps.user, deps.thread, deps.run_id) == (None, None, "r")
    with pytest.raises(dataclasses.FrozenInstanceError):
        deps.user = "mallory"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        robotlab_django.Nothing  # noqa: B018


def test_run_deps_imports_before_the_apps_are_ready() -> None:
    code = ("from robotlab_django import RunDeps; from django.apps import apps; "
            "assert not apps.ready; print(RunDeps(user=None))")
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env,
                          cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "RunDeps(user=None, thread=None, run_id=None)"


# -- every door's run gets them (issue 27, item 2) ----------------------------------------------------------------
ASK = "robot_lab--ask_user"


class Seen:
    """What the ``whoami`` tool saw of ``ctx.deps``, one entry per call: user, first name, thread, run id."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, str, Any, str | None]] = []

    def tool(self) -> Any:
        @robotlab.tool
        def whoami(ctx: robotlab.RunContext[RunDeps]) -> str:
            """Who the run is for."""
            deps = ctx.deps
            user = deps.user
            self.calls.append((user, getattr(user, "first_name", ""), deps.thread.pk if deps.thread else None,
                               deps.run_id))
            return str(user)

        return whoami


@pytest.fixture
def seen(clean_registry: None) -> Seen:
    """The ``who`` robot (``whoami`` and AskUser) and the ``whonet`` network (a ``who`` robot as its one task)."""
    recorded = Seen()

    def build(**options: Any) -> robotlab.Robot:
        return robotlab.build(name="who", local_tools=[recorded.tool(), AskUser], **options)

    def network(**options: Any) -> Any:
        built = create_network(name="whonet")
        built.task("who", build(**options))
        return built

    registry.register(build, name="who", replace=True)
    registry.register_network(network, name="whonet", replace=True)
    return recorded


@pytest.fixture
def alice() -> Any:
    return get_user_model().objects.create_user("alice", first_name="Alice")


@pytest.mark.django_db
def test_a_run_through_the_services_acts_for_the_threads_owner(scripted_llm: Script, seen: Seen,
                                                               alice: Any) -> None:
    scripted_llm(tool_call("whoami"), text("You are alice."))
    thread = Thread.objects.create(user=alice, robot_name="who")
    row = services.run_robot(thread, "who", "Who am I?")
    assert row.status == Status.COMPLETED
    assert seen.calls == [(alice, "Alice", thread.pk, row.run_id)]


@pytest.mark.django_db
def test_the_admins_rerun_acts_for_the_owner_not_the_staff_member(scripted_llm: Script, seen: Seen,
                                                                   alice: Any, admin_client: Any) -> None:
    scripted_llm(text("Hi."), tool_call("whoami"), text("You are alice."))
    thread = Thread.objects.create(user=alice, robot_name="who")
    services.run_robot(thread, "who", "Who am I?")
    response = admin_client.post("/admin/robotlab/thread/", {"action": "rerun_last_user_message",
                                                             "_selected_action": [thread.pk]})
    assert response.status_code == 302
    assert [call[0] for call in seen.calls] == [alice]


@pytest.mark.django_db
def test_an_acp_run_acts_for_the_tokens_user(scripted_llm: Script, seen: Seen, token: str) -> None:
    scripted_llm(tool_call("whoami"), text("You are ada."))
    body = {"agent_name": "who", "mode": "sync", "input": [{"parts": [{"content": "Who am I?"}]}]}
    run = Client().post("/acp/runs", json.dumps(body), content_type="application/json",
                        HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert run["status"] == "completed"
    assert [(str(user), run_id) for user, _name, _thread, run_id in seen.calls] == [
        ("ada", run["run_id"].replace("-", ""))]  # ACP shows the run id as a UUID


@pytest.mark.django_db
def test_an_anonymous_threads_run_has_no_user(scripted_llm: Script, seen: Seen) -> None:
    scripted_llm(tool_call("whoami"), text("Nobody."))
    row = services.run_robot("s-anonymous", "who", "Who am I?")
    assert seen.calls == [(None, "", row.thread_id, row.run_id)]


@pytest.mark.django_db
def test_a_network_turn_in_one_process_gives_its_tasks_the_turns_deps(scripted_llm: Script, seen: Seen,
                                                                      alice: Any) -> None:
    scripted_llm(tool_call("whoami"), text("You are alice."))
    thread = Thread.objects.create(user=alice, robot_name="whonet")
    turn = services.run_robot(thread, "whonet", "Who am I?")
    assert turn.status == Status.COMPLETED
    assert seen.calls == [(alice, "Alice", thread.pk, turn.run_id)]


@pytest.mark.django_db
def test_a_distributed_turns_task_acts_for_the_owner_under_the_turns_run_id(
        scripted_llm: Script, seen: Seen, alice: Any, settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    scripted_llm(tool_call("whoami"), text("You are alice."))
    thread = Thread.objects.create(user=alice, robot_name="whonet")
    turn = start_run(thread, "whonet", "Who am I?")
    executor.dispatch(turn)
    turn.refresh_from_db()
    assert turn.status == Status.COMPLETED and RobotResult.objects.filter(parent_id=turn.pk).count() == 1
    assert seen.calls == [(alice, "Alice", thread.pk, turn.run_id)]


@pytest.mark.django_db(transaction=True)
def test_a_resumed_parked_run_reads_its_user_again(scripted_llm: Script, seen: Seen, alice: Any) -> None:
    scripted_llm(tool_call("whoami"), tool_call(ASK, question="Sure?"))
    thread = Thread.objects.create(user=alice, robot_name="who")
    row = services.run_robot(thread, "who", "Who am I?")
    assert row.status == Status.AWAITING
    get_user_model().objects.filter(pk=alice.pk).update(first_name="Alicia")  # changed while the run waited
    scripted_llm(tool_call("whoami"), text("Done."))
    done = control.answer(row, "yes", alice)
    assert done.status == Status.COMPLETED
    # the first call is replayed from its checkpoint; the new one sees the user as stored now
    assert [(user, name) for user, name, _thread, _run in seen.calls] == [(alice, "Alice"), (alice, "Alicia")]


@pytest.mark.django_db
def test_a_deactivated_users_run_stops_with_a_clear_error(scripted_llm: Script, seen: Seen, alice: Any) -> None:
    llm = scripted_llm(tool_call("whoami"), text("You are alice."))
    thread = Thread.objects.create(user=alice, robot_name="who")
    row = start_run(thread, "who", "Who am I?")
    get_user_model().objects.filter(pk=alice.pk).update(is_active=False)  # deactivated while the run was queued
    failed = services.execute_run(row.pk, raise_errors=False)
    assert (failed.status, failed.error_type) == (Status.FAILED, "InactiveUserError")
    assert failed.error == ("The user this run acts for (alice) is deactivated: the run stopped. "
                            "Reactivate the user to run it again.")
    assert llm.requests == [] and seen.calls == []
    with pytest.raises(InactiveUserError, match="is deactivated"):
        for_row(row)
