"""End-to-end: the official ``a2a-sdk`` client (PyPI) against the example project's A2A server under daphne."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.example_project.test_example_project import ROOT, manage, project_env, served_project
from tests.robotlab_django.faults import wait_for
from tests.robotlab_django.settings import REDIS_PREFIX
from tests.robotlab_django.webhook import Webhook, serve_webhook

a2a_client = pytest.importorskip("a2a.client")
httpx = pytest.importorskip("httpx")
from a2a.types.a2a_pb2 import (  # noqa: E402
    CancelTaskRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError  # noqa: E402


@dataclass
class Site:
    """The served example project: its A2A base URL, a token of ``demo`` and one of ``admin``, its database."""

    url: str
    token: str
    other_token: str
    db: Path


@pytest.fixture(scope="module")
def a2a_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The example project under daphne (in-process executor, demo model) with tokens of two users."""
    tmp_path = tmp_path_factory.mktemp("a2a")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    other = manage(tmp_path, "robotlab_token", "admin").stdout.strip().splitlines()[-1]
    with served_project(tmp_path) as url:
        yield Site(f"{url}/a2a", token, other, tmp_path / "db.sqlite3")


@asynccontextmanager
async def _client(site: Site, agent: str, *, token: str | None = None, streaming: bool = True,
                  version: str | None = None) -> AsyncIterator[Any]:
    """An SDK client of ``agent``, its card resolved from the server (``version``: keep only that interface)."""
    headers = {"Authorization": f"Bearer {token or site.token}"} if token != "" else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        config = a2a_client.ClientConfig(httpx_client=http, streaming=streaming)
        card = await a2a_client.A2ACardResolver(http, f"{site.url}/{agent}/").get_agent_card()
        if version:
            kept = [interface for interface in card.supported_interfaces if interface.protocol_version == version]
            del card.supported_interfaces[:]
            card.supported_interfaces.extend(kept)
        client = a2a_client.ClientFactory(config).create(card)
        try:
            yield client
        finally:
            await client.close()


def _message(text: str, task: Task | None = None) -> SendMessageRequest:
    message = Message(role=Role.ROLE_USER, message_id=f"m-{abs(hash((text, id(task))))}", parts=[Part(text=text)])
    if task is not None:
        message.task_id, message.context_id = task.id, task.context_id
    return SendMessageRequest(message=message)


async def _events(client: Any, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


def _reply(task: Task) -> str:
    return "".join(part.text for artifact in task.artifacts if artifact.artifact_id == "reply"
                   for part in artifact.parts)


def _streamed(events: list[StreamResponse]) -> str:
    return "".join(part.text for event in events if event.HasField("artifact_update")
                   and event.artifact_update.artifact.artifact_id == "reply"
                   for part in event.artifact_update.artifact.parts)


def _final_state(events: list[StreamResponse]) -> int:
    return int(events[-1].status_update.status.state)


def _stored(db: Path, task_id: str) -> tuple[str, str]:
    with sqlite3.connect(db) as connection:
        row = connection.execute("SELECT status, reply FROM robotlab_robotresult WHERE run_id = ?",
                                 (task_id.replace("-", ""),)).fetchone()
    assert row is not None, f"no row for task {task_id}"
    return str(row[0]), str(row[1])


def test_every_robot_and_network_has_a_card(a2a_site: Site) -> None:
    index = httpx.get(f"{a2a_site.url}/").json()
    assert {"chat", "concierge", "support"} <= {card["name"] for card in index["agents"]}

    async def main() -> Any:
        async with httpx.AsyncClient() as http:
            return await a2a_client.A2ACardResolver(http, f"{a2a_site.url}/support/").get_agent_card()

    card = asyncio.run(main())
    assert card.name == "support" and "classifier" in card.description
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert {interface.protocol_version for interface in card.supported_interfaces} == {"1.0", "0.3"}
    assert all(interface.url == f"{a2a_site.url}/support/" for interface in card.supported_interfaces)
    assert card.security_schemes["robotlabToken"].http_auth_security_scheme.scheme == "bearer"
    assert httpx.get(f"{a2a_site.url}/nobody/.well-known/agent-card.json").status_code == 404


def test_no_token_a_bad_token_or_a_session_cookie_is_401(a2a_site: Site) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/send",
            "params": {"message": {"role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}}}
    for headers in ({}, {"Authorization": "Bearer rl_not-a-token"}, {"Authorization": "Basic ZGVtbzpkZW1v"}):
        response = httpx.post(f"{a2a_site.url}/chat/", json=body, headers=headers)
        assert response.status_code == 401 and response.headers["WWW-Authenticate"] == "Bearer"
    with httpx.Client(base_url=a2a_site.url.removesuffix("/a2a")) as browser:  # logged in on the site
        page = browser.get("/login/").text
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert csrf is not None
        browser.post("/login/", data={"username": "demo", "password": "demo", "csrfmiddlewaretoken": csrf[1]})
        assert "sessionid" in browser.cookies
        assert browser.post("/a2a/chat/", json=body).status_code == 401

    async def main() -> None:
        async with _client(a2a_site, "chat", token="") as client:
            await _events(client, _message("hello"))

    with pytest.raises(a2a_client.A2AClientError, match="401"):
        asyncio.run(main())


def test_send_returns_the_completed_task_with_the_stored_reply(a2a_site: Site) -> None:
    async def main() -> tuple[list[StreamResponse], Task]:
        async with _client(a2a_site, "chat", streaming=False) as client:
            events = await _events(client, _message("What is 6 times 7?"))
            return events, await client.get_task(GetTaskRequest(id=events[0].task.id))

    events, fetched = asyncio.run(main())
    assert len(events) == 1
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) and _stored(a2a_site.db, task.id) == ("completed", _reply(task))
    assert fetched == task
    assert [message.role for message in task.history] == [Role.ROLE_USER]


def test_stream_text_parts_join_to_the_stored_reply(a2a_site: Site) -> None:
    async def main() -> list[StreamResponse]:
        async with _client(a2a_site, "chat") as client:
            return await _events(client, _message("Tell me about robots"))

    events = asyncio.run(main())
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    chunks = [event for event in events if event.HasField("artifact_update")]
    assert len(chunks) > 1 and not chunks[0].artifact_update.append and chunks[1].artifact_update.append
    assert _final_state(events) == TaskState.TASK_STATE_COMPLETED
    assert _stored(a2a_site.db, events[0].task.id) == ("completed", _streamed(events))


def test_protocol_0_3_clients_use_message_send_and_message_stream(a2a_site: Site) -> None:
    async def main() -> tuple[list[StreamResponse], list[StreamResponse]]:
        async with _client(a2a_site, "chat", version="0.3", streaming=False) as client:
            sent = await _events(client, _message("Hello there"))
        async with _client(a2a_site, "chat", version="0.3") as client:
            streamed = await _events(client, _message("Tell me about robots"))
        return sent, streamed

    sent, streamed = asyncio.run(main())
    task = sent[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED and _stored(a2a_site.db, task.id)[1] == _reply(task)
    assert _final_state(streamed) == TaskState.TASK_STATE_COMPLETED
    assert _stored(a2a_site.db, streamed[0].task.id)[1] == _streamed(streamed)


def test_a_question_is_input_required_and_a_follow_up_message_answers_it(a2a_site: Site) -> None:
    async def main() -> tuple[Task, Task, list[StreamResponse], list[StreamResponse]]:
        async with _client(a2a_site, "concierge", streaming=False) as client:
            asked = (await _events(client, _message("Ask the user which plan suits them")))[0].task
            done = (await _events(client, _message("the pro plan", asked)))[0].task
        async with _client(a2a_site, "concierge") as client:  # the same, streamed
            ask_stream = await _events(client, _message("Ask the user which colour they like"))
            answer_stream = await _events(client, _message("green", ask_stream[0].task))
        return asked, done, ask_stream, answer_stream

    asked, done, ask_stream, answer_stream = asyncio.run(main())
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "which plan suits them" in asked.status.message.parts[0].text
    assert done.id == asked.id and done.context_id == asked.context_id
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and "the pro plan" in _reply(done)
    assert [message.parts[0].text for message in done.history][-1] == "the pro plan"
    assert _final_state(ask_stream) == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "which colour they like" in ask_stream[-1].status_update.status.message.parts[0].text
    assert _final_state(answer_stream) == TaskState.TASK_STATE_COMPLETED
    assert "green" in _streamed(answer_stream)
    assert _stored(a2a_site.db, ask_stream[0].task.id) == ("completed", _streamed(answer_stream))


def test_a_follow_up_to_a_finished_task_is_refused_and_the_context_goes_on(a2a_site: Site) -> None:
    async def main() -> tuple[Task, Task]:
        async with _client(a2a_site, "chat", streaming=False) as client:
            first = (await _events(client, _message("Hello there")))[0].task
            with pytest.raises(InvalidParamsError, match="not input-required"):
                await _events(client, _message("And again", first))
            follow = _message("And again")
            follow.message.context_id = first.context_id
            second = (await _events(client, follow))[0].task
            listed = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
            assert [task.id for task in listed.tasks] == [second.id, first.id]
            return first, second

    first, second = asyncio.run(main())
    assert second.context_id == first.context_id and second.id != first.id
    assert second.status.state == TaskState.TASK_STATE_COMPLETED


def test_another_users_task_is_not_found(a2a_site: Site) -> None:
    async def main() -> None:
        async with _client(a2a_site, "chat", streaming=False) as client:
            task = (await _events(client, _message("Hello there")))[0].task
        async with _client(a2a_site, "chat", token=a2a_site.other_token, streaming=False) as other:
            with pytest.raises(TaskNotFoundError):
                await other.get_task(GetTaskRequest(id=task.id))
            with pytest.raises(TaskNotFoundError):
                await other.cancel_task(CancelTaskRequest(id=task.id))
            with pytest.raises(TaskNotFoundError):
                await _events(other, _message("mine now", task))
            # issue 26 (8): the owner's context id is a new context of the other user's own, not an error (an oracle)
            follow = _message("on your thread")
            follow.message.context_id = task.context_id
            theirs = (await _events(other, follow))[0].task
            assert theirs.context_id == task.context_id and theirs.id != task.id
            listed = await other.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert [found.id for found in listed.tasks] == [theirs.id]
        async with _client(a2a_site, "chat", streaming=False) as client:
            listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
            assert [found.id for found in listed.tasks] == [task.id]  # the owner's context has only the owner's task
        async with _client(a2a_site, "concierge", streaming=False) as client:  # nor another agent's
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=task.id))

    asyncio.run(main())


def test_cancel_of_a_streaming_task_ends_it_cancelled(a2a_site: Site) -> None:
    # the demo model repeats the message, a word every 20 ms: some 6 s of reply, the cancel comes at its start
    story = "Tell me a long story about " + " ".join(f"robot{n}" for n in range(300))

    async def main() -> tuple[list[StreamResponse], Task, Task]:
        async with _client(a2a_site, "chat") as client, _client(a2a_site, "chat", streaming=False) as control:
            events: list[StreamResponse] = []
            cancelled: Task | None = None
            async for event in client.send_message(_message(story)):
                events.append(event)
                if event.HasField("artifact_update") and cancelled is None:
                    cancelled = await control.cancel_task(CancelTaskRequest(id=events[0].task.id))
            assert cancelled is not None
            fetched = await control.get_task(GetTaskRequest(id=cancelled.id))
            with pytest.raises(TaskNotCancelableError):
                await control.cancel_task(CancelTaskRequest(id=cancelled.id))
            return events, cancelled, fetched

    events, cancelled, fetched = asyncio.run(main())
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert _final_state(events) == TaskState.TASK_STATE_CANCELED
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    status, reply = _stored(a2a_site.db, cancelled.id)
    assert status == "cancelled" and _streamed(events).startswith(reply) and reply
    assert "robot299" not in _streamed(events)  # it stopped long before the end


def test_a_non_blocking_send_returns_at_once_and_the_task_completes(a2a_site: Site) -> None:
    async def main() -> tuple[Task, Task]:
        async with _client(a2a_site, "chat", streaming=False) as client:
            request = _message("Tell me about robots")
            request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
            started = (await _events(client, request))[0].task
            task = started
            for _ in range(600):
                if task.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.05)
                task = await client.get_task(GetTaskRequest(id=started.id))
            return started, task

    started, task = asyncio.run(main())
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _reply(task) == _stored(a2a_site.db, task.id)[1]


def test_a_client_that_leaves_a_stream_can_subscribe_to_the_task_again(a2a_site: Site) -> None:
    async def main() -> tuple[list[StreamResponse], list[StreamResponse], Task]:
        async with _client(a2a_site, "chat") as client:
            left: list[StreamResponse] = []
            async for event in client.send_message(_message("Tell me a long story about robots and their makers")):
                left.append(event)
                if event.HasField("artifact_update"):
                    break  # the client goes away; the run goes on
            again = [event async for event in client.subscribe(SubscribeToTaskRequest(id=left[0].task.id))]
            return left, again, await client.get_task(GetTaskRequest(id=left[0].task.id))

    left, again, task = asyncio.run(main())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert again[0].task.id == task.id and _final_state(again) == TaskState.TASK_STATE_COMPLETED
    assert _streamed(again) == _reply(task) == _stored(a2a_site.db, task.id)[1]
    assert _reply(task).startswith(_streamed(left))


#: The Redis database of the Celery test's broker (the project's channel layer and network memory use it too).
CELERY_REDIS = "redis://127.0.0.1:6379/11"
#: The site's names there carry this test run's id: another checkout's run (or project) on this Redis, whose
#: worker consumes a queue "default" too, never takes this site's jobs or hears its events.
CELERY_ENV = {"REDIS_URL": CELERY_REDIS, "REDIS_PREFIX": f"{REDIS_PREFIX}:"}


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    """A webhook receiver thread of the test process, which the Celery site allows (a loopback host)."""
    with serve_webhook() as hook:
        yield hook


@pytest.fixture(scope="module")
def celery_site(tmp_path_factory: pytest.TempPathFactory, webhook: Webhook) -> Iterator[Site]:
    """The example project with ``REDIS_URL`` set: daphne sends every run to a Celery worker process.

    Its A2A push notifications may go to the test's webhook receiver (and nowhere else).
    """
    pytest.importorskip("redis").Redis.from_url(CELERY_REDIS).ping()
    tmp_path = tmp_path_factory.mktemp("a2a-celery")
    env = {**CELERY_ENV, "ROBOTLAB_A2A_PUSH_URLS": webhook.url.rsplit("/", 1)[0] + "/",
           "ROBOTLAB_A2A_PUSH_PRIVATE": "1"}
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    other = manage(tmp_path, "robotlab_token", "admin").stdout.strip().splitlines()[-1]
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "example_site", "worker", "--pool", "solo",
                               "--hostname", "a2a-test@%h", "--without-gossip", "--without-mingle",
                               "--loglevel", "INFO"],
                              cwd=ROOT / "example_project", env=project_env(tmp_path, **env),
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        with served_project(tmp_path, **env) as url:
            yield Site(f"{url}/a2a", token, other, tmp_path / "db.sqlite3")
    finally:
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()


def test_tasks_run_on_a_celery_worker_and_a_question_waits_in_no_process(celery_site: Site) -> None:
    async def main() -> tuple[list[StreamResponse], Task, Task]:
        async with _client(celery_site, "chat") as client:
            streamed = await _events(client, _message("Tell me about robots"))
        async with _client(celery_site, "concierge", streaming=False) as client:
            asked = (await _events(client, _message("Ask the user which plan suits them")))[0].task
            done = (await _events(client, _message("the team plan", asked)))[0].task
        return streamed, asked, done

    # a deadline over the whole exchange: the server's keep-alive pings would hold a stream open for ever if no
    # worker took the jobs (the client's read timeout never fires)
    streamed, asked, done = asyncio.run(asyncio.wait_for(main(), 240))
    assert _final_state(streamed) == TaskState.TASK_STATE_COMPLETED
    assert _stored(celery_site.db, streamed[0].task.id) == ("completed", _streamed(streamed))
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert done.status.state == TaskState.TASK_STATE_COMPLETED and "the team plan" in _reply(done)
    with sqlite3.connect(celery_site.db) as connection:
        jobs = [row[0] for row in connection.execute("SELECT task_id FROM robotlab_robotresult")]
    log = (celery_site.db.parent / "worker.log").read_text()
    assert len(jobs) == 2 and all(re.search(rf"\[{job}\] succeeded", log) for job in jobs), log  # the worker ran them


def test_push_notifications_reach_a_webhook_signed_and_retried_by_the_worker(celery_site: Site,
                                                                             webhook: Webhook) -> None:
    """The SDK's client registers a webhook with its message: ``working`` and ``input-required`` arrive; registered
    again on the parked task, answering it sends ``working`` and ``completed``, each signed, from the Celery
    worker, which retries the notification the webhook first refused (HTTP 500)."""
    async def main() -> tuple[Task, TaskPushNotificationConfig, Task]:
        async with _client(celery_site, "concierge", streaming=False) as client:
            request = _message("Ask the user which plan suits them")
            request.configuration.task_push_notification_config.CopyFrom(TaskPushNotificationConfig(
                id="hook", url=webhook.url, token="hook-secret"))  # with the message: from its first state on
            asked = (await _events(client, request))[0].task
            assert webhook.wait_for(2, 60), webhook.states()
            assert webhook.states() == ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
            question = json.loads(webhook.received[1][1])["task"]["status"]["message"]["parts"][0]["text"]
            assert question == asked.status.message.parts[0].text and question  # the question, as GetTask has it
            config = await client.create_task_push_notification_config(TaskPushNotificationConfig(
                task_id=asked.id, id="hook", url=webhook.url, token="hook-secret"))  # the same id: replaced
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=asked.id))
            assert [found.id for found in listed.configs] == ["hook"]
            with pytest.raises(InvalidParamsError, match="Webhook refused"):
                await client.create_task_push_notification_config(TaskPushNotificationConfig(
                    task_id=asked.id, url="http://169.254.169.254/latest/meta-data/"))
            async with _client(celery_site, "concierge", token=celery_site.other_token, streaming=False) as other:
                with pytest.raises(TaskNotFoundError):
                    await other.get_task_push_notification_config(
                        GetTaskPushNotificationConfigRequest(task_id=asked.id, id="hook"))
                with pytest.raises(TaskNotFoundError):
                    await other.create_task_push_notification_config(TaskPushNotificationConfig(
                        task_id=asked.id, url=webhook.url))
            webhook.failures = 1  # the first notification is refused; the worker's retry takes it
            done = (await _events(client, _message("the team plan", asked)))[0].task
            return asked, config, done

    card = httpx.get(f"{celery_site.url}/concierge/.well-known/agent-card.json").json()
    assert card["capabilities"]["pushNotifications"] is True
    asked, config, done = asyncio.run(asyncio.wait_for(main(), 240))
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED and config.token == "hook-secret"
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    worker_log = celery_site.db.parent / "worker.log"

    def settled() -> str | None:  # "completed" taken, and the refused one's retry sent (a 4th) or dropped
        if "TASK_STATE_COMPLETED" not in webhook.states():
            return None
        if len(webhook.received) == 4:
            return "sent"
        return "superseded" if "'superseded'" in worker_log.read_text() else None

    outcome = wait_for(settled, "the notifications and the retry", 60)
    assert webhook.refused == 1
    # never an older state after a newer one: a retried "working" that comes after "completed" is dropped
    assert webhook.states()[2:] == (["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"] if outcome == "sent"
                                    else ["TASK_STATE_COMPLETED"]), (webhook.states(), worker_log.read_text())
    for headers, body in webhook.received:
        assert headers["X-RobotLab-Signature"] == "sha256=" + hmac.new(b"hook-secret", body, hashlib.sha256).hexdigest()
        assert json.loads(body)["task"]["id"] == done.id
    completed = next(json.loads(body)["task"] for _, body in webhook.received
                     if json.loads(body)["task"]["status"]["state"] == "TASK_STATE_COMPLETED")
    assert completed["artifacts"][0]["parts"][0]["text"] == _reply(done)
    log = (celery_site.db.parent / "worker.log").read_text()
    assert re.search(r"send_push_notification\[[^\]]+\] retry", log), log  # Celery's own retry, with backoff
    assert "hook-secret" not in log


def test_the_docs_client_snippet_runs(a2a_site: Site) -> None:
    page = (ROOT / "docs" / "django" / "a2a.md").read_text()
    snippet = page.split("## A client", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**project_env(a2a_site.db.parent), "ROBOTLAB_TOKEN": a2a_site.token, "A2A_URL": a2a_site.url}
    done = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "chat: A friendly assistant that can tell the time and calculate"
    assert lines[1].startswith("TASK_STATE_COMPLETED ") and len(lines[2]) > 10
