"""The per-user rate limit on queued runs, at every door: the thread websocket, the chat form, ACP and A2A.

Each door refuses the run past ``ROBOTLAB["RUN_RATE_LIMIT"]`` in its own protocol's form and queues nothing; the
count is per user across threads (an anonymous visitor: per thread) and holds under concurrent requests.
"""

from __future__ import annotations

import io
import threading
import types
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connections
from django.test import Client
from django.urls import include, path, reverse

from robotlab_django import services
from robotlab_django.accounting.rate_limits import RateLimitedError
from robotlab_django.asgi import get_robotlab_asgi_application
from robotlab_django.models import RobotResult, Thread

pytestmark = pytest.mark.django_db(transaction=True)
APP = get_robotlab_asgi_application()
URLCONF = types.ModuleType("robotlab_test_rate_limit_urls")
URLCONF.urlpatterns = [path("robotlab/", include("robotlab_django.urls")),  # type: ignore[attr-defined]
                       path("acp/", include("robotlab_django.acp.urls")),
                       path("a2a/", include("robotlab_django.a2a.urls"))]
LIMIT = 2


@pytest.fixture(autouse=True)
def _two_runs_a_minute(settings: Any) -> None:
    settings.ROOT_URLCONF = URLCONF
    settings.ROBOTLAB = {**settings.ROBOTLAB, "RUN_RATE_LIMIT": LIMIT, "RUN_RATE_PERIOD": 60}


@pytest.fixture
async def close_connections() -> AsyncIterator[None]:
    yield
    await sync_to_async(connections.close_all)()


def _user(name: str = "ada") -> Any:
    return get_user_model().objects.create_user(name, password="pw")


def _token(user: Any) -> str:
    out = io.StringIO()
    call_command("robotlab_token", user.get_username(), stdout=out)
    return out.getvalue().strip().splitlines()[-1]


def _age_runs(seconds: float) -> None:
    """Make every run ``seconds`` older, as if they were queued that long ago."""
    for row in RobotResult.objects.all():
        RobotResult.objects.filter(pk=row.pk).update(created_at=row.created_at - timedelta(seconds=seconds))


# -- the websocket ------------------------------------------------------------------------
async def _frame(socket: WebsocketCommunicator, *kinds: str) -> dict[str, Any]:
    while True:
        frame = dict(await socket.receive_json_from(timeout=5))
        if frame["type"] in kinds:
            return frame


async def test_the_socket_answers_a_message_past_the_limit_with_an_error_frame(close_connections: None) -> None:
    user = await sync_to_async(_user)()
    client = Client()
    await sync_to_async(client.force_login)(user)
    thread = await Thread.objects.acreate(user=user, robot_name="echo")
    socket = WebsocketCommunicator(APP, f"/ws/robotlab/threads/{thread.pk}/", headers=[
        (b"origin", b"http://testserver"), (b"host", b"testserver"),
        (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())])
    assert (await socket.connect())[0] is True
    for number in range(LIMIT + 1):
        await socket.send_json_to({"type": "message", "text": f"message {number}"})
    frames = [await _frame(socket, "queued", "error") for _ in range(LIMIT + 1)]
    assert [frame["type"] for frame in frames] == ["queued"] * LIMIT + ["error"]
    refused = frames[-1]
    assert refused["error"].startswith(f"Too many runs: at most {LIMIT} every 60 seconds; try again in ")
    assert 55 <= refused["retry_after"] <= 60
    assert await RobotResult.objects.filter(thread=thread).acount() == LIMIT  # nothing was queued
    await socket.send_json_to({"type": "resume", "after": 0})  # the socket stays open
    assert (await _frame(socket, "replayed"))["type"] == "replayed"
    await socket.disconnect()


# -- the chat page's form -----------------------------------------------------------------
def test_the_form_answers_429_with_retry_after(close_connections: None) -> None:
    user = _user()
    client = Client()
    client.force_login(user)
    thread = Thread.objects.create(user=user, robot_name="echo")
    url = reverse("robotlab:post_message", kwargs={"pk": thread.pk})
    for _ in range(LIMIT):
        assert client.post(url, {"message": "hi"}).status_code == 302
    refused = client.post(url, {"message": "hi"})
    assert refused.status_code == 429 and 55 <= int(refused["Retry-After"]) <= 60
    assert refused.content.decode().startswith("Too many runs")
    as_json = client.post(url, {"message": "hi"}, HTTP_ACCEPT="application/json")
    assert as_json.status_code == 429 and as_json.json()["retry_after"] == int(as_json["Retry-After"])
    assert RobotResult.objects.count() == LIMIT


def test_the_limit_counts_a_users_runs_on_all_threads_and_frees_up_as_they_age(close_connections: None) -> None:
    ada, bob = _user("ada"), _user("bob")
    first, second = (Thread.objects.create(user=ada, robot_name="echo") for _ in range(2))
    services.start_run(first, "echo", "one", user=ada, limit_rate=True)
    services.start_run(second, "echo", "two", user=ada, limit_rate=True)
    with pytest.raises(RateLimitedError, match="at most 2 every 60 seconds"):
        services.start_run(second, "echo", "three", user=ada, limit_rate=True)
    services.start_run(Thread.objects.create(user=bob, robot_name="echo"), "echo", "bob's", user=bob,
                       limit_rate=True)  # another user has a limit of their own
    services.start_run(first, "echo", "a job's run", user=ada)  # not through a door: not refused, but counted
    _age_runs(50)
    with pytest.raises(RateLimitedError) as refused:
        services.start_run(first, "echo", "three", user=ada, limit_rate=True)
    assert 9 <= refused.value.retry_after <= 10
    _age_runs(11)
    services.start_run(first, "echo", "three", user=ada, limit_rate=True)  # the window moved on
    assert RobotResult.objects.filter(thread__user=ada).count() == 4


def test_an_anonymous_visitor_is_limited_per_thread(close_connections: None) -> None:
    thread = Thread.objects.create(robot_name="echo")
    for _ in range(LIMIT):
        services.start_run(thread, "echo", "hi", limit_rate=True)
    with pytest.raises(RateLimitedError):
        services.start_run(thread, "echo", "hi", limit_rate=True)


def test_no_limit_when_the_setting_is_none(settings: Any) -> None:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "RUN_RATE_LIMIT": None}
    user = _user()
    thread = Thread.objects.create(user=user, robot_name="echo")
    for _ in range(LIMIT + 3):
        services.start_run(thread, "echo", "hi", user=user, limit_rate=True)


# -- ACP and A2A --------------------------------------------------------------------------
def test_acp_answers_429_with_retry_after_in_the_protocols_error_object(close_connections: None) -> None:
    token = _token(_user())
    body = {"agent_name": "echo", "mode": "async", "input": [{"parts": [{"content": "hi"}]}]}
    for _ in range(LIMIT):
        assert Client().post("/acp/runs", body, content_type="application/json",
                             HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 202
    session = "0b7e4a52-9d3c-4f8e-a1b2-c3d4e5f60718"  # ACP session ids are UUIDs (issue 26, 2)
    refused = Client().post("/acp/runs", {**body, "session_id": session}, content_type="application/json",
                            HTTP_AUTHORIZATION=f"Bearer {token}")
    assert refused.status_code == 429 and 55 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["code"] == "invalid_input" and refused.json()["message"].startswith("Too many runs")
    assert RobotResult.objects.count() == LIMIT
    assert not Thread.objects.filter(session_id__contains=session).exists()  # its new session was not kept either


@pytest.mark.parametrize(("method", "version"), [("SendMessage", "1.0"), ("SendStreamingMessage", "1.0"),
                                                 ("message/send", None)])
def test_a2a_answers_a_json_rpc_error(close_connections: None, method: str, version: str | None) -> None:
    pytest.importorskip("a2a.server.routes.jsonrpc_dispatcher")
    token = _token(_user())
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}", **({"HTTP_A2A_VERSION": version} if version else {})}
    message = ({"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]} if version else
               {"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]})
    services.start_run(None, "echo", "one", user=get_user_model().objects.get(), limit_rate=True)
    services.start_run(None, "echo", "two", user=get_user_model().objects.get(), limit_rate=True)
    response = Client().post("/a2a/echo/", {"jsonrpc": "2.0", "id": 7, "method": method,
                                            "params": {"message": message}}, content_type="application/json", **headers)
    error = response.json()["error"]
    assert error["message"].startswith("Too many runs: at most 2 every 60 seconds")
    if version:
        assert error["code"] == -32429
        info = error["data"][0]
        assert info["reason"] == "RATE_LIMITED" and 55 <= int(info["metadata"]["retry_after"]) <= 60
    else:  # protocol 0.3 knows no such code: the SDK sends its internal error, with the same message and data
        assert error["code"] == -32603 and 55 <= int(error["data"]["retry_after"]) <= 60
    assert RobotResult.objects.count() == LIMIT


# -- concurrency --------------------------------------------------------------------------
def test_concurrent_requests_of_one_user_never_pass_the_limit_together(postgres: None) -> None:
    user = _user()
    threads = [Thread.objects.create(user=user, robot_name="echo") for _ in range(8)]
    start = threading.Barrier(len(threads))
    refused: list[RateLimitedError] = []

    def send(thread: Any) -> None:
        try:
            start.wait(timeout=30)
            services.start_run(thread, "echo", "hi", user=user, limit_rate=True)
        except RateLimitedError as exc:
            refused.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=send, args=(thread,)) for thread in threads]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert RobotResult.objects.count() == LIMIT and len(refused) == len(threads) - LIMIT
