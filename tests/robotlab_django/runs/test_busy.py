"""What a second message does while a reply runs (issue 29, 5): each on-busy policy through the thread websocket.

The first reply runs for real in a background thread (the ``thread`` executor) and waits inside its first model call
(:class:`~tests.robotlab_django.gated_llm.GatedLLM`) while the test sends the second message.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client

from robotlab.testing import text, tool_call
from robotlab_django import services
from robotlab_django.abstract_models import Status
from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.chat.views import history_items
from robotlab_django.models import RobotResult
from robotlab_django.runs import executor
from tests.robotlab_django.gated_llm import GatedLLM

pytestmark = pytest.mark.django_db(transaction=True)
APP = get_robotlab_asgi_application()
TIMEOUT = 10


@pytest.fixture
async def close_connections() -> AsyncIterator[None]:
    """Wait for the background runs, then close the connections the ORM opened in asgiref's thread."""
    yield
    for _ in range(3):  # a run that ends dispatches the one behind it
        await asyncio.to_thread(executor.join, TIMEOUT)
    await sync_to_async(connections.close_all)()


def _setup(robot: str) -> tuple[Any, str]:
    user = get_user_model().objects.create_user("ada", password="pw")
    client = Client()
    client.force_login(user)
    thread = services.get_thread(None, user=user)
    thread.robot_name = robot
    thread.save(update_fields=["robot_name"])
    return thread, client.cookies["sessionid"].value


def _configure(settings: Any, llm: GatedLLM, robot: str, policy: str | None) -> None:
    robots = {robot: {"on_busy": policy}} if policy else {}
    # a cancel wakes its run at once in this process: no status polls beside the test's writes (the in-memory
    # SQLite database's shared cache refuses a write while another connection reads the table)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread", "LLM": lambda: llm, "ROBOTS": robots,
                         "CANCEL_POLL_INTERVAL": 60}


async def _socket(thread: Any, session: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(APP, f"/ws/robotlab/threads/{thread.pk}/", headers=[
        (b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", f"sessionid={session}".encode())])
    assert (await socket.connect())[0] is True
    return socket


class Frames:
    """What the socket sent, read until a condition holds."""

    def __init__(self, socket: WebsocketCommunicator) -> None:
        self.socket = socket
        self.frames: list[dict[str, Any]] = []

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every run event received."""
        return [event for frame in self.frames if frame["type"] == "events" for event in frame["events"]]

    async def until(self, condition: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Read frames (and the events in them) until one satisfies ``condition``; returns it."""
        seen = [*self.frames, *self.events]
        for item in seen:
            if condition(item):
                return item
        while True:
            frame = await self.socket.receive_json_from(timeout=TIMEOUT)
            self.frames.append(frame)
            for item in [frame, *frame.get("events", [])]:
                if condition(item):
                    return item

    async def send(self, message: str) -> dict[str, Any]:
        """Send a message frame; the frame answering it (``queued`` or ``error``)."""
        await self.socket.send_json_to({"type": "message", "text": message})
        return await self._answer()

    async def _answer(self) -> dict[str, Any]:
        while True:
            frame = await self.socket.receive_json_from(timeout=TIMEOUT)
            self.frames.append(frame)
            if frame["type"] in ("queued", "error"):
                return frame

    async def ended(self, run_id: str) -> None:
        """Wait for the run's ``stream.ended``."""
        await self.until(lambda item: item.get("kind") == "stream.ended" and item.get("run_id") == run_id)


async def _first_reply_running(settings: Any, llm: GatedLLM, robot: str, policy: str | None
                               ) -> tuple[Frames, dict[str, Any]]:
    _configure(settings, llm, robot, policy)
    thread, session = await sync_to_async(_setup)(robot)
    frames = Frames(await _socket(thread, session))
    first = await frames.send("first message")
    assert first["type"] == "queued" and "notice" not in first  # the thread was idle
    assert await asyncio.to_thread(llm.entered.wait, TIMEOUT)
    # what it sent so far is stored (the socket got it) before the second message comes: nothing writes meanwhile
    kind = "text.delta" if llm.partial else "run.started"
    await frames.until(lambda item: item.get("kind") == kind and item.get("run_id") == first["run_id"])
    return frames, first


def _row(pk: int) -> RobotResult:
    return RobotResult.objects.get(pk=pk)


async def test_enqueue_holds_the_message_behind_the_reply_and_runs_it_after(
        settings: Any, close_connections: None) -> None:
    llm = GatedLLM(text("first reply"), text("second reply"))
    frames, first = await _first_reply_running(settings, llm, "echo", None)  # the default policy
    second = await frames.send("second message")
    assert second["type"] == "queued" and second["on_busy"] == "enqueue" and second["behind"] == first["result_id"]
    assert second["notice"] == "queued behind the current reply"
    held = await sync_to_async(_row)(second["result_id"])
    assert held.status == Status.QUEUED and llm.calls == 1  # held: no worker took it
    llm.gate.set()
    await frames.ended(second["run_id"])
    rows = await sync_to_async(lambda: list(RobotResult.objects.order_by("sequence_number")))()
    assert [(row.status, row.reply) for row in rows] == [(Status.COMPLETED, "first reply"),
                                                         (Status.COMPLETED, "second reply")]
    # the second ran after the first ended: its history holds the first reply
    assert [m["content"] for m in llm.requests[1].messages[1:]] == ["first message", "first reply", "second message"]
    await frames.socket.disconnect()


async def test_reject_answers_an_error_frame_and_writes_nothing(settings: Any, close_connections: None) -> None:
    llm = GatedLLM(text("first reply"))
    frames, first = await _first_reply_running(settings, llm, "echo", "reject")
    refused = await frames.send("second message")
    assert refused["type"] == "error" and refused["error"].startswith("A reply is still running on this thread")
    assert await sync_to_async(RobotResult.objects.count)() == 1
    llm.gate.set()
    await frames.ended(first["run_id"])
    after = await frames.send("now it goes")  # once the reply ended, a message runs again
    assert after["type"] == "queued" and "notice" not in after
    await frames.socket.disconnect()


async def test_interrupt_cancels_the_reply_keeping_its_text_and_starts_the_new_one(
        settings: Any, close_connections: None) -> None:
    llm = GatedLLM(text("the new answer"), partial="I was saying ")
    frames, first = await _first_reply_running(settings, llm, "echo", "interrupt")
    second = await frames.send("stop, do this instead")
    assert second["on_busy"] == "interrupt" and second["notice"] == "the reply before was stopped"
    # the app's run.cancelled, with the text the reply keeps (the robot's own, when its call was cut, has none)
    cancelled = await frames.until(lambda item: item.get("kind") == "run.cancelled" and "reply" in item)
    assert cancelled["run_id"] == first["run_id"] and cancelled["reply"] == "I was saying "
    await frames.ended(second["run_id"])
    old, new = await sync_to_async(lambda: list(RobotResult.objects.order_by("sequence_number")))()
    assert (old.status, old.reply, old.stop_reason) == (Status.CANCELLED, "I was saying ", "interrupted")
    assert (new.status, new.reply) == (Status.COMPLETED, "the new answer")
    # the new reply read what was said before it: the interrupted message and its partial text
    assert [m["content"] for m in llm.requests[0].messages[1:]] == [
        "first message", "I was saying ", "stop, do this instead"]
    llm.gate.set()
    await frames.socket.disconnect()


async def test_steer_adds_the_message_to_the_running_reply_at_its_next_model_call(
        settings: Any, close_connections: None) -> None:
    llm = GatedLLM(tool_call("add", a=2, b=2), text("4, and hello"))
    frames, first = await _first_reply_running(settings, llm, "calculator", "steer")
    second = await frames.send("also say hello")
    assert second["on_busy"] == "steer" and second["behind"] == first["result_id"]
    llm.gate.set()
    steered = await frames.until(lambda item: item.get("kind") == "run.completed"
                                 and item.get("run_id") == second["run_id"])
    assert steered["stop_reason"] == "steered" and steered["into"] == first["run_id"]
    await frames.ended(first["run_id"])
    # the model's second call read the message after the tool's result
    assert llm.requests[1].messages[-1] == {"role": "user", "content": "also say hello"}
    assert [m["role"] for m in llm.requests[1].messages[-3:]] == ["assistant", "tool", "user"]
    reply, message = await sync_to_async(lambda: list(RobotResult.objects.order_by("sequence_number")))()
    assert (reply.status, reply.reply) == (Status.COMPLETED, "4, and hello")
    assert (message.status, message.stop_reason, message.reply) == (Status.COMPLETED, "steered", "")
    # the thread's history holds the message where it was said, once
    history = await sync_to_async(services.restore_robot)(reply.thread_id)
    assert [m.get("content") for m in history.messages if m["role"] == "user"] == ["first message", "also say hello"]
    assert llm.calls == 2  # no run of its own
    # the page, reloaded: the reply (its text before and after the message), then the message, "added to the reply"
    items = [(item["role"], item["text"], item["status"]) for item in history_items([reply, message])]
    assert items == [("user", "first message", ""), ("assistant", "4, and hello", "completed"),
                     ("user", "also say hello", ""), ("assistant", "", "added to the reply above")]
    await frames.socket.disconnect()
