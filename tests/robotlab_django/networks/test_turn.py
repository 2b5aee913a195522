"""Networks on threads: a registered network runs a turn, streams one run of events and stores a row per robot.

The network is the test app's ``helpdesk`` (classifier -> billing, technical or general): its router
activates the task the classifier names, so the scripted FakeLLM picks the branch.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Sum
from django.test import Client
from django.urls import include, path, reverse

from robotlab.testing import FakeLLM, raise_, text
from robotlab_django import services
from robotlab_django.models import RobotResult, RunEvent, Status, Thread
from robotlab_django.networks.turn import step_rows
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.runs import runner
from robotlab_django.runs.history import load_history
from robotlab_django.runs.runnables import build_network

pytestmark = pytest.mark.django_db

Script = Callable[..., FakeLLM]
PAYLOAD = "<script>alert('pwned')</script>"


def turn(script: Script, *replies: Any, message: str = "I was charged twice", thread: Any = "s1") -> Any:
    """Run ``helpdesk`` once on ``message`` with the scripted ``replies`` (the classifier's first)."""
    script(*replies)
    return services.run_robot(thread, "helpdesk", message)


def events_of(row: Any) -> list[dict[str, Any]]:
    return [event.to_dict() for event in RunEvent.objects.filter(result_id=row.pk).order_by("pk")]


def test_a_turn_stores_the_final_reply_and_a_row_per_robot_that_ran(scripted_llm: Script) -> None:
    llm = scripted_llm(text("billing", usage=(10, 1)), text("Your refund is on its way.", usage=(20, 5), cost=0.25))
    row = services.run_robot("s1", "helpdesk", "I was charged twice")

    assert (row.status, row.robot_name, row.reply) == (Status.COMPLETED, "helpdesk", "Your refund is on its way.")
    assert row.messages == [{"role": "user", "content": "I was charged twice"},
                            {"role": "assistant", "content": "Your refund is on its way."}]
    assert (row.input_tokens, row.output_tokens, row.cost) == (0, 0, 0)  # usage lives on the robots' rows
    steps = list(step_rows(row))
    assert [(s.robot_name, s.status, s.delegated_by, s.input, s.reply) for s in steps] == [
        ("classifier", Status.COMPLETED, "helpdesk", "I was charged twice", "billing"),
        ("billing_agent", Status.COMPLETED, "helpdesk", "I was charged twice", "Your refund is on its way.")]
    assert [(s.input_tokens, s.output_tokens, float(s.cost)) for s in steps] == [(10, 1, 0.0), (20, 5, 0.25)]
    assert [s.run_id for s in steps] == [f"{row.run_id}.1", f"{row.run_id}.2"]
    assert [m["role"] for m in steps[1].messages] == ["user", "assistant"]
    # only the activated branch ran: two requests, the second one the billing specialist's
    assert len(llm.requests) == 2
    assert "billing specialist" in llm.requests[1].messages[0]["content"]
    assert not RobotResult.objects.filter(robot_name__in=["technical_agent", "general_agent"]).exists()
    totals = RobotResult.objects.filter(thread_id=row.thread_id).aggregate(i=Sum("input_tokens"),
                                                                            o=Sum("output_tokens"))
    assert totals == {"i": 30, "o": 6}  # every token counted once


def test_a_turn_streams_one_run_of_step_events(scripted_llm: Script) -> None:
    seen: list[Any] = []
    scripted_llm(text("technical"), text("Restart the app, then log in again."))
    row = services.run_robot("s1", "helpdesk", "The app crashes", on_event=seen.append)
    events = events_of(row)

    assert {event["run_id"] for event in events} == {row.run_id}
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    kinds = [event["kind"] for event in events]
    assert kinds[0] == "run.started" and kinds[-2:] == ["run.completed", "stream.ended"]
    assert kinds.count("run.started") == kinds.count("run.completed") == 1  # the robots' own run.* are left out
    steps = [(event["kind"], event["robot"]) for event in events if event["kind"].startswith("step.")]
    assert steps == [("step.started", "classifier"), ("step.completed", "classifier"),
                     ("step.started", "technical_agent"), ("step.completed", "technical_agent")]
    streamed = "".join(event["text"] for event in events if event["kind"] == "text.delta"
                       and event["task"] == "technical")
    assert streamed == "Restart the app, then log in again."
    assert events[-2]["reply"] == row.reply == streamed
    assert seen and {event.run_id for event in seen} == {row.run_id}  # the caller's on_event sees them too


def test_the_next_turn_continues_the_conversation(scripted_llm: Script) -> None:
    first = turn(scripted_llm, text("billing"), text("Which invoice?"))
    llm = scripted_llm(text("billing"), text("Refunded invoice 42."))
    second = services.run_robot(first.thread_id, "helpdesk", "Invoice 42")

    assert second.reply == "Refunded invoice 42."
    specialist = [m for m in llm.requests[1].messages if m["role"] != "system"]
    assert [(m["role"], m["content"]) for m in specialist] == [
        ("user", "I was charged twice"), ("assistant", "Which invoice?"), ("user", "Invoice 42")]
    assert [m["content"] for m in load_history(first.thread_id)] == [
        "I was charged twice", "Which invoice?", "Invoice 42", "Refunded invoice 42."]  # no robot's own rows


def test_a_failing_final_robot_fails_the_turn(scripted_llm: Script) -> None:
    scripted_llm(text("general"), raise_(RuntimeError("model <b>down</b>")))
    with pytest.raises(services.RunFailedError, match="model <b>down</b>") as raised:
        services.run_robot("s1", "helpdesk", "Hello")
    row = raised.value.result
    assert (row.status, row.error_type, row.reply) == (Status.FAILED, "RuntimeError", "")
    steps = list(step_rows(row))
    assert [(s.robot_name, s.status, s.error_type) for s in steps] == [
        ("classifier", Status.COMPLETED, ""), ("general_agent", Status.FAILED, "RuntimeError")]
    kinds = [(event["kind"], event.get("robot")) for event in events_of(row)]
    assert ("step.failed", "general_agent") in kinds
    assert [kind for kind, _ in kinds[-2:]] == ["run.failed", "stream.ended"]
    assert load_history(row.thread_id) == []


def test_a_network_that_raises_fails_the_run(scripted_llm: Script) -> None:
    scripted_llm(text("nowhere"))  # the router activates a task the network does not have
    row = services.run_robot("s1", "helpdesk", "Hi", raise_errors=False)
    assert (row.status, row.error_type) == (Status.FAILED, "ConfigurationError")
    assert "activated unknown task 'nowhere'" in row.error
    assert [event["kind"] for event in events_of(row)][-2:] == ["run.failed", "stream.ended"]


def test_an_unknown_name_writes_nothing() -> None:
    with pytest.raises(UnknownRobotError, match=r"Unknown robot 'helpdeks'\..*Registered networks: helpdesk\. "
                                                r"Did you mean 'helpdesk'\?"):
        services.start_run(None, "helpdeks", "hi")
    assert not Thread.objects.exists()


def test_the_networks_setting_is_checked(settings: Any) -> None:
    from robotlab_django import checks

    settings.ROBOTLAB = {"NETWORKS": {"x": 3}}
    [message] = checks.check_settings()
    assert message.id == "robotlab.E002" and "maps network names to dotted paths" in message.msg
    settings.ROBOTLAB = {"NETWORKS": {"ghost": "tests.robotlab_django.nowhere.build"}}
    [message] = checks.check_settings()
    assert message.id == "robotlab.E003"
    assert message.msg.startswith("ROBOTLAB['NETWORKS']['ghost'] = ") and "network factory" in message.hint


def test_build_network_applies_the_app_settings(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "DEFAULT_MODEL": "openai/gpt-4o-mini", "MAX_TOOL_ROUNDS": 3}
    network = build_network("helpdesk", llm=FakeLLM())
    robots = [task.robot for task in network.tasks.values()]
    assert [robot.name for robot in robots] == ["classifier", "billing_agent", "technical_agent", "general_agent"]
    assert {robot.config.model for robot in robots} == {"openai/gpt-4o-mini"}
    assert {robot.config.max_tool_rounds for robot in robots} == {3}


def test_the_celery_task_runs_a_network_turn_once(scripted_llm: Script) -> None:
    scripted_llm(text("billing"), text("Done."))
    row = services.start_run("s1", "helpdesk", "Refund please")
    assert runner.deliver(row.pk)["status"] == Status.COMPLETED
    assert runner.deliver(row.pk)["skipped"] is True  # a second delivery does nothing
    assert RobotResult.objects.filter(thread_id=row.thread_id).count() == 3


def test_rerun_repeats_the_network_turn(scripted_llm: Script) -> None:
    first = turn(scripted_llm, text("billing"), text("Refunded."))
    scripted_llm(text("billing"), text("Refunded again."))
    again = services.rerun_last_user_message(first.thread_id)  # the sync executor runs it
    again.refresh_from_db()
    assert (again.robot_name, again.input, again.reply) == ("helpdesk", "I was charged twice", "Refunded again.")


@pytest.mark.django_db(transaction=True)
async def test_arun_robot_runs_a_network(scripted_llm: Script) -> None:
    scripted_llm(text("technical"), text("Reinstall it."))
    row = await services.arun_robot("s1", "helpdesk", "It crashes")
    assert (row.status, row.reply) == (Status.COMPLETED, "Reinstall it.")
    names = [s.robot_name async for s in step_rows(row)]
    assert names == ["classifier", "technical_agent"]


# -- the chat pages ----------------------------------------------------------------------
URLCONF = types.ModuleType("robotlab_test_network_urls")
URLCONF.urlpatterns = [path("robotlab/", include("robotlab_django.urls"))]  # type: ignore[attr-defined]


@pytest.fixture
def client(settings: Any) -> Client:
    """A logged-in client that enforces CSRF, as a browser's requests are checked."""
    settings.ROOT_URLCONF = URLCONF
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.create_user("alice", password="pw"))
    return client


def csrf_token(html: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert found, "no CSRF token in the form"
    return found.group(1)


def test_the_thread_list_offers_networks_and_starts_a_thread_with_one(client: Client) -> None:
    page = client.get(reverse("robotlab:thread_list"))
    html = page.content.decode()
    assert '<optgroup label="Networks">' in html
    assert '<option value="helpdesk">helpdesk (network)</option>' in html
    assert '<option value="echo"' in html  # robots are still offered
    refused = client.post(reverse("robotlab:thread_list"), {"robot": "helpdesk"})
    assert refused.status_code == 403 and not Thread.objects.exists()  # no CSRF token
    created = client.post(reverse("robotlab:thread_list"), {"robot": "helpdesk",
                                                            "csrfmiddlewaretoken": csrf_token(html)})
    thread = Thread.objects.get()
    assert thread.robot_name == "helpdesk"
    assert created["Location"] == reverse("robotlab:chat", kwargs={"pk": thread.pk})
    unknown = client.post(reverse("robotlab:thread_list"), {"robot": "nothing",
                                                            "csrfmiddlewaretoken": csrf_token(html)})
    assert unknown.status_code == 400 and "Unknown robot or network." in unknown.content.decode()


def test_a_network_thread_chats_and_shows_its_history(client: Client, scripted_llm: Script) -> None:
    thread = Thread.objects.create(user=get_user_model().objects.get(), robot_name="helpdesk")
    chat_url = reverse("robotlab:chat", kwargs={"pk": thread.pk})
    html = client.get(chat_url).content.decode()
    assert 'id="rl-kind">network</span>' in html
    assert "Routes &lt;your&gt; question to a specialist" in html  # the description, escaped
    scripted_llm(text("general"), text(PAYLOAD))
    posted = client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "Hi <b>there</b>"},
                         HTTP_ACCEPT="application/json", HTTP_X_CSRFTOKEN=csrf_token(html))
    assert posted.status_code == 202
    assert posted.json()["result"]["status"] == Status.COMPLETED  # the sync executor ran it
    reloaded = client.get(chat_url).content.decode()
    assert reloaded.count('class="rl-message ') == 2  # the turn, not one message per robot
    assert "Hi &lt;b&gt;there&lt;/b&gt;" in reloaded
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in reloaded and PAYLOAD not in reloaded
    badges = re.findall(r'<span class="rl-step-badge done">([^<]*)</span>', reloaded)
    assert badges == ["classifier", "general_agent"]
    polled = client.get(reverse("robotlab:results_json", kwargs={"pk": thread.pk})).json()
    assert [result["robot"] for result in polled["results"]] == ["helpdesk"]  # the robots' rows are steps


def test_registry_holds_the_test_network() -> None:
    assert registry.is_network("helpdesk") and "helpdesk" not in registry.names()


def test_deltas_of_different_tasks_are_not_merged() -> None:
    from robotlab.streaming import Event
    from robotlab_django.streaming.coalescer import Coalescer

    buffer = Coalescer(interval=60)
    pieces = [("billing", "Re"), ("billing", "fund"), ("technical", "Re"), ("technical", "start"), ("billing", "ed")]
    for seq, (task, piece) in enumerate(pieces, 1):  # two robots of one network run streaming side by side
        buffer.add(Event(kind="text.delta", run_id="turn", seq=seq, ts=0.0, data={"text": piece, "task": task}))
    merged = [(event.data["task"], event.data["text"], event.seq) for event in buffer.drain()]
    assert merged == [("billing", "Refund", 2), ("technical", "Restart", 4), ("billing", "ed", 5)]


@pytest.mark.django_db(transaction=True)
async def test_a_websocket_message_on_a_network_thread_streams_the_turn(scripted_llm: Script) -> None:
    from asgiref.sync import sync_to_async
    from django.db import connections

    from tests.robotlab_django.chat.test_consumers import _events, _frames_until_ended, _login, _socket

    scripted_llm(text("billing"), text("Refund on its way."))
    user, session = await sync_to_async(_login)("ada")
    thread = await Thread.objects.acreate(user=user, robot_name="helpdesk")
    socket = await _socket(thread.pk, session)
    try:
        assert (await socket.connect())[0] is True
        await socket.send_json_to({"type": "message", "text": "Refund please"})
        frames = await _frames_until_ended(socket)
        queued = next(frame for frame in frames if frame["type"] == "queued")
        row = await RobotResult.objects.aget(pk=queued["result_id"])
        assert (row.robot_name, row.status, row.reply) == ("helpdesk", Status.COMPLETED, "Refund on its way.")
        events = _events(frames)
        assert {event["run_id"] for event in events} == {row.run_id}
        assert [e["robot"] for e in events if e["kind"] == "step.started"] == ["classifier", "billing_agent"]
        assert [e["kind"] for e in events][-2:] == ["run.completed", "stream.ended"]
        await socket.disconnect()
    finally:
        await sync_to_async(connections.close_all)()


def test_a_one_process_turn_stores_its_graph_for_the_admin(scripted_llm: Script) -> None:
    from robotlab_django.networks.graph import task_boxes, turn_graph

    turn(scripted_llm, text("billing"), text("Your refund is on its way."))
    row = RobotResult.objects.get(robot_name="helpdesk")
    assert dict(row.turn_state["dependencies"]) == {"classifier": [], "billing": None, "technical": None,
                                                    "general": None}
    boxes = {box.name: (box.status, box.depth, box.row is not None) for box in task_boxes(row)}
    assert boxes == {"classifier": ("completed", 0, True), "billing": ("completed", 1, True),
                     "technical": ("skipped", 0, False), "general": ("skipped", 0, False)}  # never started
    picture = str(turn_graph(row))
    assert picture.startswith('<svg class="robotlab-graph"') and "classifier" in picture
