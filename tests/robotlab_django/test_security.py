"""Hardening of the thread websocket (through the real ASGI stack) and of the errors end users read."""

from __future__ import annotations

import json
import time
import types
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import litellm
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.sessions.models import Session
from django.db import connections
from django.test import Client
from django.urls import include, path, reverse
from django.utils import timezone

from robotlab.streaming import Event
from robotlab.testing import raise_, text
from robotlab_django import services
from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.chat.consumers import CLOSE_FORBIDDEN, ThreadConsumer
from robotlab_django.models import RobotResult, Status, Thread
from robotlab_django.runs.user_errors import PROVIDER_MESSAGES, public_error, public_events
from robotlab_django.streaming.broadcast import get_layer, message, publish
from robotlab_django.streaming.event_stream import persist_events

pytestmark = pytest.mark.django_db(transaction=True)
APP = get_robotlab_asgi_application()
URLCONF = types.ModuleType("robotlab_test_security_urls")
URLCONF.urlpatterns = [path("robotlab/", include("robotlab_django.urls")),  # type: ignore[attr-defined]
                       path("admin/", admin.site.urls)]
RAW = "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached for org-SECRET on gpt-4o"


@pytest.fixture
async def close_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


def _user(name: str, *, staff: bool = False, perms: tuple[str, ...] = ()) -> tuple[Any, Client]:
    user = get_user_model().objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="robotlab", codename__in=perms))
    client = Client()
    client.force_login(user)
    return user, client


async def _socket(thread_pk: int, client: Client, query: str = "") -> WebsocketCommunicator:
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"),
               (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]
    path = f"/ws/robotlab/threads/{thread_pk}/" + (f"?{query}" if query else "")
    socket = WebsocketCommunicator(APP, path, headers=headers)
    return socket


async def _owner() -> tuple[Any, Client, Any, WebsocketCommunicator]:
    user, client = await sync_to_async(_user)("ada")
    thread = await Thread.objects.acreate(user=user, robot_name="echo")
    socket = await _socket(thread.pk, client)
    assert (await socket.connect())[0] is True
    return user, client, thread, socket


async def _closed_with(socket: WebsocketCommunicator) -> int | None:
    """The close code of the socket's next output that closes it (skipping frames), or None."""
    while True:
        output = await socket.receive_output(timeout=5)
        if output["type"] == "websocket.close":
            return int(output.get("code", 1000))


async def _publish_one(thread: Any, text: str) -> None:
    row = await RobotResult.objects.acreate(thread=thread, sequence_number=1, robot_name="echo")
    stored = await sync_to_async(persist_events)(thread.pk, row.pk, [
        Event(kind="text.delta", run_id=row.run_id, seq=1, ts=time.time(), data={"text": text})])
    await publish(get_layer(), message(thread.pk, row.pk, 0, stored, time.time()))


# -- 1. an open socket does not outlive its session ---------------------------------------
async def test_a_logout_closes_the_users_open_socket(close_connections: None) -> None:
    _user, client, _thread, socket = await _owner()
    await sync_to_async(client.logout)()
    assert await _closed_with(socket) == CLOSE_FORBIDDEN


async def test_a_deactivated_user_is_closed_at_once(close_connections: None) -> None:
    user, _client, _thread, socket = await _owner()
    user.is_active = False
    await user.asave()
    assert await _closed_with(socket) == CLOSE_FORBIDDEN


async def test_a_deleted_session_queues_no_run(close_connections: None) -> None:
    _user, _client, thread, socket = await _owner()
    await Session.objects.all().adelete()  # expired or flushed without the logout signal
    await socket.send_json_to({"type": "message", "text": "spend money"})
    assert await _closed_with(socket) == CLOSE_FORBIDDEN
    assert await RobotResult.objects.filter(thread=thread).acount() == 0


async def test_a_deactivated_user_queues_no_run_even_without_the_signal(close_connections: None) -> None:
    user, _client, thread, socket = await _owner()
    await get_user_model().objects.filter(pk=user.pk).aupdate(is_active=False)  # no post_save
    await socket.send_json_to({"type": "message", "text": "spend money"})
    assert await _closed_with(socket) == CLOSE_FORBIDDEN
    assert await RobotResult.objects.filter(thread=thread).acount() == 0



async def _change_password(user: Any) -> None:
    user.set_password("a new one")  # the session's hash no longer matches; no signal closes the socket
    await user.asave()


async def _expire_session(user: Any) -> None:
    await Session.objects.aupdate(expire_date=timezone.now() - timedelta(seconds=1))


async def _deactivate_silently(user: Any) -> None:
    await get_user_model().objects.filter(pk=user.pk).aupdate(is_active=False)  # no post_save


@pytest.mark.parametrize("revoke", [_change_password, _expire_session, _deactivate_silently])
@pytest.mark.parametrize("frame", [{"type": "answer", "text": "pro"}, {"type": "cancel"}])
async def test_answer_and_cancel_frames_check_the_session_as_it_is_now(
        close_connections: None, scripted_llm: Any, frame: dict[str, Any], revoke: Any) -> None:
    llm = scripted_llm(text("Pro it is."))
    user, _client, thread, socket = await _owner()
    row = await RobotResult.objects.acreate(thread=thread, sequence_number=1, robot_name="echo", input="Which plan?",
                                            status=Status.AWAITING, question={"question": "Which plan?"})
    await revoke(user)
    await socket.send_json_to({**frame, "result_id": row.pk})
    assert await _closed_with(socket) == CLOSE_FORBIDDEN
    await row.arefresh_from_db()
    assert (row.status, row.answers, llm.requests) == (Status.AWAITING, [], [])  # not resumed, not billed


async def test_answer_and_cancel_frames_act_while_the_session_holds(close_connections: None, scripted_llm: Any) -> None:
    llm = scripted_llm(text("Pro it is."))
    _user, _client, thread, socket = await _owner()
    parked = [await RobotResult.objects.acreate(thread=thread, sequence_number=number, robot_name="echo",
                                                input="Which plan?", status=Status.AWAITING,
                                                question={"question": "Which plan?"}) for number in (1, 2)]
    await socket.send_json_to({"type": "cancel", "result_id": parked[0].pk})
    assert await _frame_of(socket, "cancelled") == {"type": "cancelled", "result_id": parked[0].pk,
                                                    "status": "cancelled"}
    await socket.send_json_to({"type": "answer", "result_id": parked[1].pk, "text": "pro"})
    assert (await _frame_of(socket, "answered"))["result_id"] == parked[1].pk
    assert len(llm.requests) == 1
    await socket.disconnect()


async def _frame_of(socket: WebsocketCommunicator, kind: str) -> dict[str, Any]:
    """The next frame of type ``kind`` (skipping event batches)."""
    while True:
        frame = await socket.receive_json_from(timeout=5)
        if frame["type"] == kind:
            return dict(frame)

async def test_live_events_stop_once_the_session_is_gone(close_connections: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ThreadConsumer, "recheck_interval", 0.0)
    _user, _client, thread, socket = await _owner()
    await Session.objects.all().adelete()
    await _publish_one(thread, "the thread's private words")
    output = await socket.receive_output(timeout=5)
    assert output == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}
    assert await socket.receive_nothing(timeout=0.2)


async def test_live_events_still_flow_while_the_session_holds(close_connections: None,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ThreadConsumer, "recheck_interval", 0.0)  # the check runs and passes
    _user, _client, thread, socket = await _owner()
    await _publish_one(thread, "still yours")
    frame = await socket.receive_json_from(timeout=5)
    assert [event["text"] for event in frame["events"]] == ["still yours"]
    await socket.disconnect()


# -- 2. the view permission, not is_staff -------------------------------------------------
async def test_staff_without_the_view_permission_cannot_read_another_users_thread(close_connections: None) -> None:
    owner, _client = await sync_to_async(_user)("ada")
    thread = await Thread.objects.acreate(user=owner, robot_name="echo")
    _staff, staff_client = await sync_to_async(_user)("root", staff=True)
    socket = await _socket(thread.pk, staff_client, query="after=0")
    assert await socket.connect() == (False, CLOSE_FORBIDDEN)


async def test_the_view_permission_without_staff_is_not_enough_either(close_connections: None) -> None:
    owner, _client = await sync_to_async(_user)("ada")
    thread = await Thread.objects.acreate(user=owner, robot_name="echo")
    _clerk, clerk_client = await sync_to_async(_user)("clerk", perms=("view_thread",))
    socket = await _socket(thread.pk, clerk_client, query="after=0")
    assert await socket.connect() == (False, CLOSE_FORBIDDEN)


async def test_staff_with_the_view_permission_may_replay(close_connections: None) -> None:
    owner, _client = await sync_to_async(_user)("ada")
    thread = await Thread.objects.acreate(user=owner, robot_name="echo")
    _staff, staff_client = await sync_to_async(_user)("root", staff=True, perms=("view_thread",))
    socket = await _socket(thread.pk, staff_client, query="after=0")
    assert (await socket.connect())[0] is True
    assert await socket.receive_json_from(timeout=5) == {"type": "replayed", "cursor": 0}
    await socket.disconnect()


# -- 3. the two frames that crashed the consumer --------------------------------------------
async def test_an_infinite_cursor_and_deep_nesting_get_error_frames(close_connections: None) -> None:
    _user, _client, _thread, socket = await _owner()
    for frame, error in (
        ('{"type": "resume", "after": 1e400}', '"after" must be an integer cursor.'),
        ('{"type": "resume", "after": 99999999999999999999999}',
         f'"after" must be a cursor from 0 to {2**63 - 1}, not 99999999999999999999999.'),
        ("[" * 30_000 + "]" * 30_000, "The frame is nested too deeply."),
        (json.dumps({"type": "message", "text": "a\x00b"}), "The message contains a NUL character; remove it."),
    ):
        await socket.send_to(text_data=frame)
        assert await socket.receive_json_from(timeout=5) == {"type": "error", "error": error}
    await socket.send_json_to({"type": "resume", "after": 0})  # still open
    assert (await socket.receive_json_from(timeout=5))["type"] == "replayed"
    await socket.disconnect()


# -- 4. short messages for end users, the whole text for staff --------------------------------
def test_provider_errors_map_to_short_messages() -> None:
    assert public_error("RateLimitError", RAW) == ("", "The model is rate limited; try again in a minute.")
    wrapped = f"LLM request to 'openai/gpt-4o' failed: rate limited (HTTP 429): RateLimitError: {RAW}"
    assert public_error("InferenceError", wrapped) == ("", PROVIDER_MESSAGES["RateLimitError"])
    assert public_error("InferenceError", "LLM request to 'x' failed (HTTP 503): Weird: down")[1].startswith(
        "The model provider is having trouble")
    # the app's own messages are shown as they are
    assert public_error("ValueError", "bad") == ("ValueError", "bad")
    own = "Token budget exceeded: 120 tokens used, budget is 50"
    assert public_error("InferenceError", own) == ("InferenceError", own)
    events = public_events([{"kind": "run.failed", "error": RAW, "error_type": "RateLimitError"},
                            {"kind": "text.delta", "text": RAW}])
    assert events[0]["error"] == PROVIDER_MESSAGES["RateLimitError"] and events[1]["text"] == RAW


def _rate_limited() -> Exception:
    return litellm.RateLimitError(message="Rate limit reached for org-SECRET on gpt-4o", llm_provider="openai",
                                  model="gpt-4o")


def test_the_chat_page_shows_a_short_message_and_the_admin_the_whole_error(
        scripted_llm: Any, settings: Any) -> None:
    settings.ROOT_URLCONF = URLCONF
    scripted_llm(raise_(_rate_limited()))
    user, client = _user("ada")
    thread = Thread.objects.create(user=user, robot_name="echo")
    response = client.post(reverse("robotlab:post_message", kwargs={"pk": thread.pk}), {"message": "hi"},
                           HTTP_ACCEPT="application/json")
    result = response.json()["result"]
    assert (result["status"], result["error"], result["error_type"]) == (
        "failed", PROVIDER_MESSAGES["RateLimitError"], "")
    page = client.get(reverse("robotlab:chat", kwargs={"pk": thread.pk})).text
    polled = client.get(reverse("robotlab:results_json", kwargs={"pk": thread.pk}), {"after": 0}).text
    for shown in (page, polled):
        assert "org-SECRET" not in shown and "OpenAIException" not in shown
    assert "The model is rate limited; try again in a minute." in page
    row = RobotResult.objects.get(thread=thread)
    assert row.status == Status.FAILED and "org-SECRET" in row.error
    _root, admin_client = _user("root", staff=True, perms=("view_robotresult",))
    change = admin_client.get(reverse("admin:robotlab_robotresult_change", args=[row.pk])).text
    assert "org-SECRET" in change


async def test_the_websocket_sends_the_short_message(close_connections: None, scripted_llm: Any) -> None:
    scripted_llm(raise_(_rate_limited()))
    _user_, _client, thread, socket = await _owner()
    await sync_to_async(services.run_robot)(thread, "echo", "hi", raise_errors=False)
    failed: list[dict[str, Any]] = []
    while not failed:
        frame = await socket.receive_json_from(timeout=5)
        failed = [event for event in frame.get("events", []) if event["kind"] == "run.failed"]
    assert failed[0]["error"] == PROVIDER_MESSAGES["RateLimitError"]
    assert "org-SECRET" not in json.dumps(failed)
    await socket.disconnect()
