"""Property test: whatever a client sends, the thread websocket answers and never closes with 1011.

Arbitrary JSON values, frames shaped like the real ones with arbitrary fields, and arbitrary byte
and text strings go to one owner's socket through the real ASGI stack (origin check, sessions,
auth); after each, a ``resume`` must still be answered with ``replayed``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.models import Thread

pytestmark = pytest.mark.django_db(transaction=True)
APP = get_robotlab_asgi_application()

_scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
            | st.text(max_size=50))
JSON_VALUES = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=5)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=5), max_leaves=20)
FRAMES = st.fixed_dictionaries({"type": st.sampled_from(["resume", "message", "other", ""])},
                               optional={"after": JSON_VALUES, "text": JSON_VALUES, "extra": JSON_VALUES})
#: A frame is sent as text (JSON of a value, or any text) or as bytes.
SENT = (JSON_VALUES.map(lambda value: ("text", json.dumps(value)))
        | FRAMES.map(lambda frame: ("text", json.dumps(frame)))
        | st.text(max_size=200).map(lambda raw: ("text", raw))
        | st.binary(max_size=200).map(lambda raw: ("bytes", raw))
        | st.integers(1, 40_000).map(lambda depth: ("text", "[" * depth + "]" * depth))
        | st.sampled_from(['{"type": "resume", "after": 1e400}', '{"type": "resume", "after": -1e400}',
                           '{"type": "resume", "after": NaN}', '{"type": "message", "text": "\\ud800"}',
                           '{"type": "message", "text": "\\u0000"}']).map(lambda raw: ("text", raw)))


def _owner_session() -> tuple[int, str]:
    user = get_user_model().objects.create_user("fuzz", password="pw")
    thread = Thread.objects.create(user=user, robot_name="echo")
    client = Client()
    client.force_login(user)
    return thread.pk, client.cookies["sessionid"].value


async def _until_replayed(socket: WebsocketCommunicator) -> None:
    """Read outputs until the probe's ``replayed`` frame; fail on any close (1011 above all)."""
    while True:
        output = await socket.receive_output(timeout=10)
        assert output["type"] == "websocket.send", output  # a close, with 1011 or any code, fails
        frame = json.loads(output["text"])
        if frame.get("type") == "replayed":
            return


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=st.lists(SENT, min_size=1, max_size=4))
async def test_no_frame_closes_the_socket_with_1011(sent: list[tuple[str, Any]]) -> None:
    if not await Thread.objects.filter(user__username="fuzz").aexists():
        await sync_to_async(_owner_session)()
    thread = await Thread.objects.aget(user__username="fuzz")
    session = await sync_to_async(_session_of)()
    socket = WebsocketCommunicator(APP, f"/ws/robotlab/threads/{thread.pk}/", headers=[
        (b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", f"sessionid={session}".encode())])
    try:
        assert (await socket.connect())[0] is True
        for kind, raw in sent:
            await socket.send_input({"type": "websocket.receive", kind: raw})
            await socket.send_json_to({"type": "resume", "after": 0})
            await _until_replayed(socket)
        await socket.disconnect()
    finally:
        await sync_to_async(connections.close_all)()


def _session_of() -> str:
    client = Client()
    client.force_login(get_user_model().objects.get(username="fuzz"))
    return client.cookies["sessionid"].value
