"""The thread websocket through the real ASGI stack (origin check, sessions, auth) and the in-memory layer."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connections
from django.test import Client

from robotlab.llm.types import LLMRequest, LLMResponse
from robotlab.streaming import Event
from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.chat.consumers import CLOSE_FORBIDDEN, MAX_FRAME_BYTES
from robotlab_django.models import RobotResult, RunEvent
from robotlab_django.runs import control as run_control
from robotlab_django.runs.records import start_run
from robotlab_django.runs.sync_bridge import blocking
from robotlab_django.streaming.broadcast import MESSAGE_TYPE, thread_group
from robotlab_django.streaming.event_stream import persist_events

pytestmark = pytest.mark.django_db(transaction=True)
APP = get_robotlab_asgi_application()


@pytest.fixture
async def close_connections() -> AsyncIterator[None]:
    """Close the connections the ORM opened in asgiref's thread, as the end of a request would."""
    yield
    await sync_to_async(connections.close_all)()


def _login(name: str, *, staff: bool = False, perms: tuple[str, ...] = ()) -> tuple[Any, str]:
    user = get_user_model().objects.create_user(name, password="pw", is_staff=staff)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="robotlab", codename__in=perms))
    client = Client()
    client.force_login(user)
    return user, client.cookies["sessionid"].value


async def _socket(thread_pk: int, session: str | None, *, origin: bytes = b"http://testserver",
                  query: str = "") -> WebsocketCommunicator:
    headers = [(b"origin", origin), (b"host", b"testserver")]
    if session:
        headers.append((b"cookie", f"sessionid={session}".encode()))
    path = f"/ws/robotlab/threads/{thread_pk}/" + (f"?{query}" if query else "")
    return WebsocketCommunicator(APP, path, headers=headers)


async def _frames_until_ended(socket: WebsocketCommunicator) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while not any(event["kind"] == "stream.ended" for frame in frames for event in frame.get("events", [])):
        frames.append(await socket.receive_json_from(timeout=5))
    return frames


def _events(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [event for frame in frames if frame["type"] == "events" for event in frame["events"]]


async def _owned_thread() -> tuple[Any, str, Any]:
    user, session = await sync_to_async(_login)("ada")
    thread = await sync_to_async(services.get_thread)(None, user=user)
    return user, session, thread


async def test_the_owner_gets_live_events(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    row = await services.arun_robot(thread, "echo", "hi", llm=FakeLLM([text("live words for you")]))
    events = _events(await _frames_until_ended(socket))
    assert events[0]["kind"] == "run.started" and events[0]["run_id"] == row.run_id
    assert "".join(e["text"] for e in events if e["kind"] == "text.delta") == "live words for you"
    assert [e["cursor"] for e in events] == sorted(e["cursor"] for e in events)
    await socket.disconnect()


async def test_a_run_in_a_worker_thread_reaches_the_socket_stamped(close_connections: None) -> None:
    # the "thread" executor's case: a sync run in another thread publishes on the consumers' loop
    _user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    row = await asyncio.to_thread(services.run_robot, thread, "echo", "hi", llm=FakeLLM([text("from a thread")]))
    frames = await _frames_until_ended(socket)
    assert "".join(e["text"] for e in _events(frames) if e["kind"] == "text.delta") == row.reply == "from a thread"
    assert all(frame["t_emit"] >= max(event["ts"] for event in frame["events"]) for frame in frames)
    await socket.disconnect()


async def test_another_user_anonymous_or_missing_thread_is_refused_with_4403(close_connections: None) -> None:
    _user, _session, thread = await _owned_thread()
    _other, other_session = await sync_to_async(_login)("bob")
    for pk, session in ((thread.pk, other_session), (thread.pk, None), (thread.pk + 999, other_session)):
        socket = await _socket(pk, session)
        assert await socket.connect() == (False, CLOSE_FORBIDDEN)


async def test_staff_may_watch_but_not_post(close_connections: None) -> None:
    _user, _session, thread = await _owned_thread()
    _staff, staff_session = await sync_to_async(_login)("root", staff=True, perms=("view_thread",))
    socket = await _socket(thread.pk, staff_session)
    assert (await socket.connect())[0] is True
    await socket.send_json_to({"type": "message", "text": "hello"})
    assert await socket.receive_json_from(timeout=5) == {
        "type": "error", "error": "Only the thread's owner may send messages."}
    await socket.disconnect()


async def test_a_foreign_origin_is_refused(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session, origin=b"http://evil.example")
    assert (await socket.connect())[0] is False


async def test_a_reconnecting_client_gets_what_it_missed(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    await services.arun_robot(thread, "echo", "one", llm=FakeLLM([text("first reply")]))
    stored = [pk async for pk in RunEvent.objects.filter(thread_id=thread.pk).order_by("pk")
              .values_list("pk", flat=True)]
    socket = await _socket(thread.pk, session, query="after=0")
    assert (await socket.connect())[0] is True
    replay = await socket.receive_json_from(timeout=5)
    assert [event["cursor"] for event in replay["events"]] == stored
    assert await socket.receive_json_from(timeout=5) == {"type": "replayed", "cursor": stored[-1]}
    await socket.disconnect()

    await services.arun_robot(thread, "echo", "two", llm=FakeLLM([text("second reply")]))  # while away
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    await socket.send_json_to({"type": "resume", "after": stored[-1]})
    missed = (await socket.receive_json_from(timeout=5))["events"]
    assert missed and all(event["cursor"] > stored[-1] for event in missed)
    assert "".join(e["text"] for e in missed if e["kind"] == "text.delta") == "second reply"
    assert (await socket.receive_json_from(timeout=5))["type"] == "replayed"
    await socket.disconnect()


def _stored_batch(thread: Any, row: Any, seq: int, piece: str) -> list[dict[str, Any]]:
    return persist_events(thread.pk, row.pk, [
        Event(kind="text.delta", run_id=row.run_id, seq=seq, ts=time.time(), data={"text": piece})])


async def _publish(thread: Any, row: Any, prev: int, events: list[dict[str, Any]]) -> None:
    await get_channel_layer().group_send(thread_group(thread.pk), {
        "type": MESSAGE_TYPE, "thread": thread.pk, "result": row.pk, "prev": prev, "t_emit": time.time(),
        "events": events})


async def test_a_batch_the_layer_lost_is_sent_from_the_stored_rows(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    row = await sync_to_async(services.start_run)(thread, "echo", "hi")
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    lost = await sync_to_async(_stored_batch)(thread, row, 1, "lost ")  # stored, never published
    second = await sync_to_async(_stored_batch)(thread, row, 2, "found")
    await _publish(thread, row, lost[-1]["cursor"], second)
    assert (await socket.receive_json_from(timeout=5))["events"] == lost
    live = await socket.receive_json_from(timeout=5)
    assert live["events"] == second and "t_emit" in live
    await _publish(thread, row, lost[-1]["cursor"], second)  # delivered twice: sent once
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()


async def test_a_lost_last_batch_comes_with_the_runs_sweep(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    row = await sync_to_async(services.start_run)(thread, "echo", "hi")
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    last = await sync_to_async(_stored_batch)(thread, row, 1, "the end")  # its message never arrives
    await _publish(thread, row, last[-1]["cursor"], [])  # the sweep: no events, the run's last cursor
    assert (await socket.receive_json_from(timeout=5))["events"] == last
    await _publish(thread, row, last[-1]["cursor"], [])
    assert await socket.receive_nothing(timeout=0.2)  # nothing missing: nothing sent
    await socket.disconnect()


async def test_a_socket_without_after_starts_at_the_newest_stored_event(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    row = await sync_to_async(services.start_run)(thread, "echo", "hi")
    before = await sync_to_async(_stored_batch)(thread, row, 1, "before ")
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    after = await sync_to_async(_stored_batch)(thread, row, 2, "after")
    await _publish(thread, row, before[-1]["cursor"], after)  # no gap: "before" predates the socket
    assert (await socket.receive_json_from(timeout=5))["events"] == after
    assert await socket.receive_nothing(timeout=0.2)
    await socket.disconnect()


async def test_a_batch_stored_as_the_socket_is_accepted_reaches_it(close_connections: None, monkeypatch: Any) -> None:
    # the worker stores the run's first batch just as the handshake completes (seen on PostgreSQL)
    from robotlab_django.chat.consumers import ThreadConsumer

    _user, session, thread = await _owned_thread()
    row = await sync_to_async(services.start_run)(thread, "echo", "hi")
    stored: list[dict[str, Any]] = []
    done = asyncio.Event()
    accept = ThreadConsumer.accept

    async def accept_then_store(self: Any, *args: Any) -> None:
        await accept(self, *args)
        stored.extend(await sync_to_async(_stored_batch)(thread, row, 1, "first"))
        done.set()

    monkeypatch.setattr(ThreadConsumer, "accept", accept_then_store)
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    await asyncio.wait_for(done.wait(), 5)
    await _publish(thread, row, 0, stored)
    assert (await socket.receive_json_from(timeout=5))["events"] == stored
    await socket.disconnect()


async def test_bad_frames_get_an_error_and_the_socket_stays_open(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    oversized = json.dumps({"type": "message", "text": "x" * MAX_FRAME_BYTES})
    for frame, error in (
        ("not json", "The frame is not JSON."),
        ("[1, 2]", 'A frame is a JSON object with a "type".'),
        (oversized, f"The frame has {len(oversized)} bytes; the limit is {MAX_FRAME_BYTES}."),
        ('{"type": "dance"}', "Unknown frame type 'dance'; send 'resume', 'message', 'answer', 'approval' or "
         "'cancel'."),
        ('{"type": "resume", "after": "x"}', '"after" must be an integer cursor.'),
        ('{"type": "message", "text": "  "}', 'A message needs a non-empty "text".'),
    ):
        await socket.send_to(text_data=frame)
        assert await socket.receive_json_from(timeout=5) == {"type": "error", "error": error}
    await socket.send_to(bytes_data=b"\xff\xfe")
    assert (await socket.receive_json_from(timeout=5))["type"] == "error"
    await socket.send_json_to({"type": "resume", "after": 0})  # still open and answering
    assert await socket.receive_json_from(timeout=5) == {"type": "replayed", "cursor": 0}
    await socket.disconnect()


async def test_a_message_from_the_owner_queues_a_run_that_streams(close_connections: None) -> None:
    _user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    await socket.send_json_to({"type": "message", "text": "Hello robot"})
    frames = await _frames_until_ended(socket)
    queued = next(frame for frame in frames if frame["type"] == "queued")
    row = await RobotResult.objects.aget(pk=queued["result_id"], thread_id=thread.pk)
    assert (row.input, row.status, queued["run_id"]) == ("Hello robot", "completed", row.run_id)
    events = _events(frames)
    assert {event["run_id"] for event in events} == {row.run_id}
    assert "".join(e["text"] for e in events if e["kind"] == "text.delta") == row.reply
    await socket.disconnect()


def _anonymous_session(thread_pk: int) -> str:
    from robotlab_django.chat.access import SESSION_KEY

    client = Client()
    session = client.session
    session[SESSION_KEY] = [thread_pk]
    session.save()
    return str(session.session_key)


async def test_an_anonymous_visitor_sees_its_own_threads_only_when_login_is_not_required(
        settings: Any, close_connections: None) -> None:
    thread = await sync_to_async(services.get_thread)(None)
    session = await sync_to_async(_anonymous_session)(thread.pk)
    socket = await _socket(thread.pk, session)
    assert await socket.connect() == (False, CLOSE_FORBIDDEN)  # login required by default
    settings.ROBOTLAB_CHAT_LOGIN_REQUIRED = False
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    await socket.disconnect()
    stranger = await _socket(thread.pk, await sync_to_async(_anonymous_session)(thread.pk + 1))
    assert await stranger.connect() == (False, CLOSE_FORBIDDEN)


async def test_a_distributed_turn_replays_exactly_what_went_live(close_connections: None, settings: Any,
                                                                 scripted_llm: Any) -> None:
    """Every task of a turn run as one job per task streams to the thread; a reconnecting client gets it all again.

    Live and replayed, the events are the same (cursors, kinds, text), and each task's come in its own order.
    """
    from robotlab_django.runs import executor

    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "sync", "DISTRIBUTED_NETWORKS": True}
    scripted_llm(text("billing"), text("Your refund is on its way."))
    user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    turn = await sync_to_async(start_run)(thread, "helpdesk", "I was charged twice", user=user)
    await sync_to_async(executor.dispatch)(turn)
    live = _events(await _frames_until_ended(socket))
    await socket.disconnect()
    rows = [row async for row in RobotResult.objects.filter(parent_id=turn.pk).order_by("pk")]
    assert [row.task_name for row in rows] == ["classifier", "billing"] and len({row.pk for row in rows}) == 2

    again = await _socket(thread.pk, session, query="after=0")
    assert (await again.connect())[0] is True
    replayed: list[dict[str, Any]] = []
    while (frame := await again.receive_json_from(timeout=5))["type"] != "replayed":
        replayed.extend(frame["events"])
    await again.disconnect()
    assert [(e["cursor"], e["kind"], e.get("text")) for e in replayed] == [
        (e["cursor"], e["kind"], e.get("text")) for e in live]
    texts = {task: "".join(e["text"] for e in live if e["kind"] == "text.delta" and e.get("task") == task)
             for task in ("classifier", "billing")}
    assert texts == {"classifier": "billing", "billing": "Your refund is on its way."}
    assert {e["run_id"] for e in live} == {turn.run_id}  # one stream: the turn's
    for task in ("classifier", "billing", None):  # each task's events (and the turn's own) in causal order
        seqs = [e["seq"] for e in live if e.get("task") == task]
        assert seqs and seqs == sorted(seqs), task
    assert [e["cursor"] for e in live] == sorted(e["cursor"] for e in live)


class _CancelledWhileItStreams:
    """Streams words; after the fifth its run is cancelled (as by its owner), and it streams on until it is stopped."""

    def __init__(self, pk: Any) -> None:
        self.pk = pk

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        assert on_text is not None
        for index in range(100_000):
            on_text(f"w{index} ")
            if index == 5:  # on the run's own connection (SQLite's in-memory database locks a second one out)
                await blocking(self._cancel)
            await asyncio.sleep(0)  # the next word: the run notices the cancel between two of them
        raise AssertionError("the run was not stopped")

    def _cancel(self) -> None:
        run_control.cancel(RobotResult.objects.get(pk=self.pk), check_owner=False)


async def test_a_cancelled_run_ends_on_the_socket_with_the_text_its_row_keeps(close_connections: None) -> None:
    """One ``run.cancelled`` ends the run on the socket, and it carries the reply the row keeps: the text the
    socket streamed. A page ends its reply at the first ``run.cancelled``; the robot's own (no reply, emitted as
    its runner stopped it) made the chat page show "cancelled" before the text the row keeps. Whether a worker
    stored it depended on timing: ``test_a_stopped_pump_stores_nothing_its_robot_emits_as_it_unwinds``
    (``streaming/test_event_stream.py``) forces that interleaving; this is the whole path, runner to socket."""
    user, session, thread = await _owned_thread()
    socket = await _socket(thread.pk, session)
    assert (await socket.connect())[0] is True
    row = await sync_to_async(start_run)(thread, "echo", "Write a lot", user=user)
    await asyncio.to_thread(services.execute_run, row.pk, llm=_CancelledWhileItStreams(row.pk), raise_errors=False)
    events = _events(await _frames_until_ended(socket))
    await socket.disconnect()
    await row.arefresh_from_db()
    ends = [event for event in events if event["kind"] in ("run.cancelled", "run.failed", "run.completed")]
    streamed = "".join(event["text"] for event in events if event["kind"] == "text.delta")
    assert [(event["kind"], event.get("reply")) for event in ends] == [("run.cancelled", row.reply)]
    assert row.status == "cancelled" and streamed == row.reply and row.reply.startswith("w0 w1 w2 w3 w4 w5 ")
    assert events[-1]["kind"] == "stream.ended" and [e["kind"] for e in events].count("stream.ended") == 1
