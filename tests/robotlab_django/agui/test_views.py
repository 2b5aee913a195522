"""The AG-UI endpoint in process (the ``sync`` executor, a scripted model): a streamed run, a tool round, a network
turn and a parked run, each event parsed by the official ``ag-ui-protocol`` models; resume; cancel; refusals.

The end-to-end tests with ``@ag-ui/client`` against daphne are in tests/example_project/test_agui.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

import robotlab
from robotlab.testing import FakeLLM, text, tool_call, tool_calls
from robotlab.tools import AskUser
from robotlab_django.models import RobotResult, Thread
from robotlab_django.registry import registry
from robotlab_django.tools import model_tools
from tests.robotlab_django.agui.client import checked, frames, messages, of_type, post, run_input, text_of
from tests.robotlab_django.notesapp.models import Note

pytestmark = pytest.mark.django_db

ASK = "robot_lab--ask_user"


def test_a_streamed_run_is_every_event_the_official_models_read(token: str,
                                                                 scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("Hello there, how are you today?"))
    found = frames(post("/agui/echo", run_input("Hi", run="run-7"), token=token))
    events = checked(found)
    row = RobotResult.objects.get()
    assert [event["type"] for event in events[:3]] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT"]
    assert (events[0]["threadId"], events[0]["runId"], events[0]["protocolVersion"]) == ("t1", "run-7", "1.0")
    stored = events[0]["metadata"]["robotlab"]["runId"]
    assert stored.replace("-", "") == row.run_id and events[2]["snapshot"]["robotlab"]["runId"] == stored
    assert events[1]["messages"] == [{"id": "run-7-user", "role": "user", "content": "Hi"}]
    assert text_of(events) == row.reply == "Hello there, how are you today?"
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t1", "runId": "run-7", "outcome": {"type": "success"},
                          "result": row.reply, "usage": events[-1]["usage"]}
    assert all(ident for ident, _ in found)  # every event can be reconnected from


def test_a_tool_round_is_a_tool_call_its_result_and_the_reply(token: str,
                                                             scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_calls(("add", {"a": 2, "b": 3}), content="Let me add. "), text("It is 5."))
    events = checked(frames(post("/agui/calculator", run_input("2 + 3?"), token=token)))
    start, = of_type(events, "TOOL_CALL_START")
    first, second = of_type(events, "TEXT_MESSAGE_START")
    assert start["toolCallName"] == "add" and start["parentMessageId"] == first["messageId"]
    assert json.loads(of_type(events, "TOOL_CALL_ARGS")[0]["delta"]) == {"a": 2, "b": 3}
    result, = of_type(events, "TOOL_CALL_RESULT")
    assert (result["toolCallId"], result["content"]) == (start["toolCallId"], "5")
    kept = messages(events)
    assert [(m["role"], m.get("content")) for m in kept] == [
        ("user", "2 + 3?"), ("assistant", "Let me add. "), ("tool", "5"), ("assistant", "It is 5.")]
    assert kept[1]["toolCalls"][0]["function"]["name"] == "add" and second["messageId"] == kept[3]["id"]


def test_a_network_turn_streams_each_task_as_a_subagent_step(token: str,
                                                             scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("billing"), text("Your refund is on its way."))
    events = checked(frames(post("/agui/helpdesk", run_input("I was charged twice"), token=token)))
    turn = RobotResult.objects.get(parent__isnull=True)
    started = of_type(events, "SUBAGENT_STARTED")
    assert [(event["name"], event["subagentRunId"]) for event in started] == [
        ("classifier", f"{events[0]['metadata']['robotlab']['runId']}/classifier"),
        ("billing_agent", f"{events[0]['metadata']['robotlab']['runId']}/billing")]
    steps = [(event["type"], event["stepName"], event["subagentRunId"]) for event in events
             if event["type"].startswith("STEP_")]
    assert steps == [("STEP_STARTED", "classifier", started[0]["subagentRunId"]),
                     ("STEP_FINISHED", "classifier", started[0]["subagentRunId"]),
                     ("STEP_STARTED", "billing", started[1]["subagentRunId"]),
                     ("STEP_FINISHED", "billing", started[1]["subagentRunId"])]
    by_task = {event["subagentRunId"]: "" for event in started}
    for event in of_type(events, "TEXT_MESSAGE_CONTENT"):
        by_task[event["subagentRunId"]] += event["delta"]
    assert list(by_task.values()) == ["billing", "Your refund is on its way."]
    assert [event["result"] for event in of_type(events, "SUBAGENT_FINISHED")] == list(by_task.values())
    assert events[-1]["outcome"] == {"type": "success"} and events[-1]["result"] == turn.reply


@pytest.fixture
def asker(clean_registry: None) -> None:
    """A robot that asks its user."""
    registry.register(lambda **options: robotlab.build(name="asker", local_tools=[AskUser], **options), name="asker",
                      replace=True)


@pytest.mark.django_db(transaction=True)  # the resumed run replays its steps from checkpoints, as in production
def test_a_parked_run_ends_with_an_interrupt_and_resume_completes_it(token: str, asker: None,
                                                                     scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_calls((ASK, {"question": "Which plan?", "choices": ["basic", "pro"]}), content="Sure. "))
    first = checked(frames(post("/agui/asker", run_input("Sign me up", run="a"), token=token)))
    row = RobotResult.objects.get()
    assert row.status == "awaiting"
    call, = of_type(first, "TOOL_CALL_START")
    assert first[-1]["outcome"]["type"] == "interrupt"
    parked, = first[-1]["outcome"]["interrupts"]
    assert parked["id"] == row.question["request_id"] and parked["toolCallId"] == call["toolCallId"]
    assert (parked["reason"], parked["message"]) == ("input_required", "Which plan?")
    assert parked["responseSchema"] == {"type": "string", "enum": ["basic", "pro"]}
    assert parked["metadata"]["robotlab"]["choices"] == ["basic", "pro"]

    scripted_llm(text("You are on pro."))
    resume = run_input(None, run="b", resume=[{"interruptId": parked["id"], "status": "resolved", "payload": "2"}])
    second = checked(frames(post("/agui/asker", resume, token=token)))
    row.refresh_from_db()
    assert row.status == "completed" and row.reply == "You are on pro."
    assert [event["type"] for event in second[:2]] == ["RUN_STARTED", "STATE_SNAPSHOT"]  # the client keeps its messages
    assert second[0]["runId"] == "b" and not of_type(second, "TOOL_CALL_START")  # the replayed call is not sent again
    result, = of_type(second, "TOOL_CALL_RESULT")
    assert (result["toolCallId"], result["content"]) == (call["toolCallId"], "pro")
    assert text_of(second) == "You are on pro." and second[-1]["outcome"] == {"type": "success"}
    kept = messages(second, messages(first))
    assert [(m["role"], m.get("content")) for m in kept] == [
        ("user", "Sign me up"), ("assistant", "Sure. "), ("tool", "pro"), ("assistant", "You are on pro.")]
    again = post("/agui/asker", resume, token=token)  # answered: nothing waits on it any more
    assert again.status_code == 404 and "was answered or cancelled already" in again.json()["message"]


def test_an_interrupt_cancelled_by_resume_ends_the_run_cancelled(token: str, asker: None,
                                                                 scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_call(ASK, question="Which plan?"))
    parked = checked(frames(post("/agui/asker", run_input("Sign me up"), token=token)))[-1]["outcome"]["interrupts"][0]
    resume = run_input(None, run="b", resume=[{"interruptId": parked["id"], "status": "cancelled"}])
    events = checked(frames(post("/agui/asker", resume, token=token)))
    assert events[-1]["outcome"] == {"type": "cancelled"} and RobotResult.objects.get().status == "cancelled"


@pytest.fixture
def note(clean_registry: None, token: str) -> Note:
    """A note of ada (the token's user), and a robot that renames it after approval."""
    registry.register(lambda **options: robotlab.build(name="notes", local_tools=model_tools(
        Note, fields=["title"], owner_field="owner", write=True), **options), name="notes", replace=True)
    ada = get_user_model().objects.get(username="ada")
    ada.user_permissions.add(Permission.objects.get(codename="change_note"))
    return Note.objects.create(owner=ada, title="old")


def test_a_tool_call_to_approve_is_an_interrupt_that_takes_approved(token: str, note: Note,
                                                                    scripted_llm: Callable[..., FakeLLM]) -> None:
    rename = tool_call("update_note", raw_arguments=json.dumps({"id": note.pk, "title": "new"}))
    scripted_llm(rename, rename, text("Renamed."))
    first = checked(frames(post("/agui/notes", run_input("rename it"), token=token)))
    parked = first[-1]["outcome"]["interrupts"][0]
    assert parked["reason"] == "tool_approval" and parked["toolCallId"] == of_type(first, "TOOL_CALL_START")[0][
        "toolCallId"]
    assert parked["responseSchema"]["properties"] == {"approved": {"type": "boolean"}}
    assert parked["metadata"]["robotlab"]["details"]["changes"] == [{"field": "title", "before": "old", "after": "new"}]

    def resume(payload: Any) -> Any:
        body = run_input(None, run="b", resume=[{"interruptId": parked["id"], "status": "resolved",
                                                 "payload": payload}])
        return post("/agui/notes", body, token=token)

    refused = resume("perhaps")
    assert refused.status_code == 422 and '{"approved": true}' in refused.json()["message"]
    events = checked(frames(resume({"approved": True})))
    note.refresh_from_db()
    assert note.title == "new" and events[-1]["outcome"] == {"type": "success"} and text_of(events) == "Renamed."


def test_a_thread_of_several_runs_snapshots_its_history(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("First reply."), text("Second reply."))
    checked(frames(post("/agui/echo", run_input("one", run="r1"), token=token)))
    events = checked(frames(post("/agui/echo", run_input("two", run="r2"), token=token)))
    snapshot = of_type(events, "MESSAGES_SNAPSHOT")[0]["messages"]
    assert [(m["role"], m["content"]) for m in snapshot] == [
        ("user", "one"), ("assistant", "First reply."), ("user", "two")]
    assert snapshot[-1]["id"] == "r2-user"
    assert Thread.objects.count() == 1 and RobotResult.objects.count() == 2


def test_cancel_ends_the_threads_unfinished_runs_as_the_chat_pages_cancel_does(
        token: str, asker: None, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_call(ASK, question="Which plan?"))
    started = checked(frames(post("/agui/asker", run_input("Sign me up"), token=token)))[0]
    answer = post("/agui/asker/cancel", {"threadId": "t1"}, token=token)
    assert answer.status_code == 202
    assert answer.json() == {"threadId": "t1", "cancelled": [started["metadata"]["robotlab"]["runId"]]}
    row = RobotResult.objects.get()
    assert row.status == "cancelled"
    assert list(row.events.order_by("pk").values_list("kind", flat=True))[-2:] == ["run.cancelled", "stream.ended"]
    again = post("/agui/asker/cancel", {"threadId": "t1", "runId": started["metadata"]["robotlab"]["runId"]},
                 token=token)
    assert again.status_code == 409 and "nothing to cancel" in again.json()["message"]
    assert post("/agui/asker/cancel", {"threadId": "nope"}, token=token).status_code == 404
    assert post("/agui/asker/cancel", {"runId": "x"}, token=token).status_code == 422


def _other_user_thread() -> Thread:
    bob = get_user_model().objects.create_user("bob", password="pw")
    return Thread.objects.create(user=bob, robot_name="echo")


def test_refusals_come_before_any_event_and_say_what_was_wrong(token: str) -> None:
    body = run_input("Hi")
    unauthenticated = post("/agui/echo", body)
    assert unauthenticated.status_code == 401 and "Bearer" in unauthenticated.json()["message"]
    bad = post("/agui/echo", body, token="rl_not-a-token")
    assert bad.status_code == 401 and bad["WWW-Authenticate"] == "Bearer"
    assert post("/agui/nobody", body, token=token).status_code == 404
    assert Client().get("/agui/echo", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 405
    cases = {
        b"{not json": (400, "not JSON"),
        b"[]": (422, "RunAgentInput JSON object"),
        json.dumps({**body, "threadId": None}).encode(): (422, "'threadId' must be a non-empty string"),
        json.dumps({**body, "threadId": "two words"}).encode(): (422, "'threadId': a thread id is a string"),
        json.dumps({**body, "runId": 7}).encode(): (422, "'runId' must be a non-empty string"),
        json.dumps({**body, "messages": "hi"}).encode(): (422, "'messages' is required"),
        json.dumps({**body, "messages": [{"id": "m", "role": "robot", "content": "x"}]}).encode():
            (422, "messages[0].role must be one of"),
        json.dumps({**body, "messages": [{"id": "m", "role": "assistant", "content": "x"}]}).encode():
            (422, "must end with the user's new message (role 'user'): its last message has the role 'assistant'"),
        json.dumps({**body, "messages": [{"id": "m", "role": "user", "content": [{"type": "image"}]}]}).encode():
            (422, "messages[0].content[0].source must be an object"),
        json.dumps({**body, "tools": [{"name": "x"}]}).encode(): (422, "tools[0].description must be a string"),
        json.dumps({**body, "resume": [{"interruptId": "i", "status": "maybe"}]}).encode():
            (422, "resume[0].status must be 'resolved' or 'cancelled'"),
    }
    for raw, (status, message) in cases.items():
        answer = post("/agui/echo", raw, token=token)
        assert (answer.status_code, message in answer.json()["message"]) == (status, True), (raw, answer.json())
    unknown = post("/agui/echo", {**body, "resume": [{"interruptId": "i", "status": "resolved", "payload": "x"}]},
                   token=token)
    assert unknown.status_code == 404 and "waits on interrupt 'i'" in unknown.json()["message"]
    garbled = post("/agui/echo", body, token=token, HTTP_LAST_EVENT_ID="1:2:3")
    assert garbled.status_code == 422 and "Last-Event-ID is not an id" in garbled.json()["message"]
    assert not RobotResult.objects.exists()


def test_another_users_thread_is_refused_and_their_ids_name_threads_of_ones_own(token: str) -> None:
    theirs = _other_user_thread()
    refused = post("/agui/echo", run_input("Hi", thread=theirs.session_id), token=token)
    assert refused.status_code == 403 and "not a thread of yours" in refused.json()["message"]
    assert not theirs.results.exists()
    bob = theirs.user
    from robotlab_django.protocols.tokens import issue_token

    _, bobs = issue_token(bob)
    checked(frames(post("/agui/echo", run_input("Hi", thread="shared"), token=bobs)))
    checked(frames(post("/agui/echo", run_input("Hi", thread="shared"), token=token)))
    assert sorted(Thread.objects.filter(results__isnull=False).values_list("user__username", flat=True)) == [
        "ada", "bob"]  # one thread each: a client's id is scoped to its user
    bobs_run = RobotResult.objects.get(thread__user=bob).run_id
    stolen = post("/agui/echo", run_input("Hi", thread="shared"), token=token,
                  HTTP_LAST_EVENT_ID=f"{bobs_run}:0:s1:")
    assert stolen.status_code == 404 and "names no run" in stolen.json()["message"]


def test_the_chat_pages_session_needs_its_csrf_token(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("Hello."))
    client = Client(enforce_csrf_checks=True)
    client.force_login(get_user_model().objects.get(username="ada"))
    missing = post("/agui/echo", run_input("Hi"), client=client)
    assert missing.status_code == 403 and missing.json()["code"] == "csrf_failed"
    assert "X-CSRFToken" in missing.json()["message"] and not RobotResult.objects.exists()
    secret = "a" * 32
    client.cookies["csrftoken"] = secret
    events = checked(frames(post("/agui/echo", run_input("Hi"), client=client, HTTP_X_CSRFTOKEN=secret)))
    assert text_of(events) == "Hello." and RobotResult.objects.get().thread.user.username == "ada"
