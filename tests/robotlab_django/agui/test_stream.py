"""Reconnecting to an AG-UI stream: from the id of any event, the rest of the stream comes exactly as it was sent.

In process (the ``sync`` executor): each run below has finished when its stream is read, so a reconnect from each of
its ids can be compared with the first stream's rest, event for event and id for id. The reconnect of a live stream
(a dropped connection mid-reply, under daphne) is in tests/example_project/test_agui.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from django.contrib.auth import get_user_model

import robotlab
from robotlab.testing import FakeLLM, text, tool_call, tool_calls
from robotlab.tools import AskUser
from robotlab_django.agui import stream as agui_stream
from robotlab_django.models import RobotResult
from robotlab_django.protocols.tokens import revoke
from robotlab_django.registry import registry
from tests.robotlab_django.agui.client import Frame, checked, frames, of_type, post, run_input, text_of

pytestmark = pytest.mark.django_db


def _every_reconnect_is_the_rest(path: str, body: dict[str, Any], token: str, first: list[Frame]) -> None:
    """A reconnect from each event's id sends exactly the events after it, with their ids."""
    for index, (ident, _) in enumerate(first):
        assert ident is not None
        rest = frames(post(path, body, token=token, HTTP_LAST_EVENT_ID=ident))
        assert rest == first[index + 1:], f"after event {index} ({ident})"


def test_a_tool_round_and_its_reply_replay_from_every_event(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(tool_calls(("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1}), content="Adding. "),
                 text("It is 5, and 2."))
    body = run_input("2 + 3, and 1 + 1?")
    first = frames(post("/agui/calculator", body, token=token))
    checked(first)
    _every_reconnect_is_the_rest("/agui/calculator", body, token, first)
    assert text_of([event for _, event in first]) == "Adding. " + RobotResult.objects.get().reply
    assert RobotResult.objects.count() == 1  # a reconnect starts nothing


def test_a_network_turn_replays_from_every_event(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("technical"), text("Restart the app, then log in again."))
    body = run_input("The app crashes")
    first = frames(post("/agui/helpdesk", body, token=token))
    checked(first)
    _every_reconnect_is_the_rest("/agui/helpdesk", body, token, first)


@pytest.mark.django_db(transaction=True)
def test_a_resumed_run_replays_from_every_event_of_its_stream(token: str, clean_registry: None,
                                                              scripted_llm: Callable[..., FakeLLM]) -> None:
    registry.register(lambda **options: robotlab.build(name="asker", local_tools=[AskUser], **options), name="asker",
                      replace=True)
    scripted_llm(tool_calls(("robot_lab--ask_user", {"question": "Which plan?"}), content="Sure. "))
    parked = checked(frames(post("/agui/asker", run_input("Sign me up"), token=token)))[-1]
    scripted_llm(text("Pro it is."))
    body = run_input(None, run="b", resume=[{"interruptId": parked["outcome"]["interrupts"][0]["id"],
                                            "status": "resolved", "payload": "pro"}])
    first = frames(post("/agui/asker", body, token=token))
    assert text_of(checked(first)) == "Pro it is."
    _every_reconnect_is_the_rest("/agui/asker", body, token, first)  # the resume entry is not answered again


def test_a_reconnect_names_its_run_and_thread(token: str, scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm(text("One."))
    first = frames(post("/agui/echo", run_input("Hi"), token=token))
    ident = str(first[3][0])
    other_thread = post("/agui/echo", run_input("Hi", thread="t2"), token=token, HTTP_LAST_EVENT_ID=ident)
    assert other_thread.status_code == 404 and "names no run of 'echo' on thread 't2'" in other_thread.json()["message"]
    assert post("/agui/calculator", run_input("Hi"), token=token, HTTP_LAST_EVENT_ID=ident).status_code == 404
    run_id, after, group, rows = ident.split(":")
    forged = post("/agui/echo", run_input("Hi"), token=token, HTTP_LAST_EVENT_ID=f"{run_id}:{after}:{group}:999-1")
    assert forged.status_code == 422 and "names rows of another run" in forged.json()["message"]
    row = rows.split("-")[0]
    missing = post("/agui/echo", run_input("Hi"), token=token, HTTP_LAST_EVENT_ID=f"{run_id}:{after}:e1:{row}-99999")
    assert missing.status_code == 422 and "an event this run does not have" in missing.json()["message"]


def test_a_revoked_token_ends_the_stream_it_opened(token: str, scripted_llm: Callable[..., FakeLLM],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agui_stream, "RECHECK", 0.0)  # check before every event
    scripted_llm(tool_call("add", a=1, b=2), text("3."))
    response = post("/agui/calculator", run_input("1 + 2?"), token=token)  # the stream is read below, lazily
    from robotlab_django.models import ApiToken

    revoke(ApiToken.objects.get(user=get_user_model().objects.get(username="ada")))
    events = [event for _, event in frames(response)]
    assert events[-1] == {"type": "RUN_ERROR", "code": "unauthorized", "message": events[-1]["message"]}
    assert not of_type(events, "TOOL_CALL_START") and "authenticate again" in events[-1]["message"]


async def test_a_quiet_run_gets_keepalive_comments_between_its_events() -> None:
    gate = asyncio.Event()

    async def source() -> AsyncIterator[str]:
        await asyncio.wait_for(gate.wait(), 30)
        yield "event"

    found: list[str | None] = []
    async for item in agui_stream.keepalive(source(), every=0.01):
        found.append(item)
        gate.set()  # the first keep-alive came: the event may come now
    assert found == [None, "event"]
