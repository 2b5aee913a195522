"""Streams that are exact on every door: the official ``acp-sdk`` and ``a2a-sdk`` clients against the example
project under Celery (a prefork worker, one child), on a Redis database of this module's own.

* A network turn runs one job per task (distributed), each task's events on its own row: the protocol streams
  send each task's text as it streams (a specialist's text arrives while its row is still running), joined exactly
  to the task rows' replies.
* A network turn whose specialist's pool child is SIGKILLed mid-stream (the task executed again): an A2A stream
  dropped there and ``SubscribeToTask`` join to exactly the stored replies, as ACP's stored events do.
* A stream across a SIGKILLed pool child (the run executed again, attempts 2) joins to the stored reply: the new
  attempt's text, which repeats what was sent, is not sent again.
* A network turn cancelled while its specialist streams keeps the text streamed so far on the turn's row and the
  task's row, with one ``run.cancelled`` on the task's row, and ACP's output shows it.
* AG-UI: a distributed turn streams each task as a subagent from its own row, and a stream dropped mid-turn
  reconnects (``Last-Event-ID``) to exactly the rest; the run across a killed worker reads once, nothing twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
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
from tests.robotlab_django.faults import children, database_env
from tests.robotlab_django.settings import REDIS_PREFIX

acp_client = pytest.importorskip("acp_sdk.client")
acp_models = pytest.importorskip("acp_sdk.models")
a2a_client = pytest.importorskip("a2a.client")
httpx = pytest.importorskip("httpx")
from a2a.types.a2a_pb2 import (  # noqa: E402
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)

pytestmark = pytest.mark.slow

#: The Redis database of this module's broker, channel layer and network memory (no other test uses it).
REDIS = "redis://127.0.0.1:6379/5"
#: Seconds any wait of these tests may take.
WAIT = 120.0


@dataclass
class Site:
    """The served example project, its worker, and its database (a SQLite file, or a PostgreSQL URL)."""

    url: str
    token: str
    db: Path | str
    worker: subprocess.Popen[bytes]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The example project with ``REDIS_URL``: every run (and each task of a network turn) on a Celery worker."""
    redis = pytest.importorskip("redis").Redis.from_url(REDIS)
    try:
        redis.ping()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"Redis cannot be reached: {exc}")
    tmp_path = tmp_path_factory.mktemp("streams")
    database, drop = database_env(tmp_path)  # ROBOTLAB_TEST_DB=postgres: a PostgreSQL database of its own
    db: Path | str = database.get("ROBOTLAB_TEST_DATABASE_URL") or tmp_path / "db.sqlite3"
    # the run's own prefix on every Redis key and channel: no other checkout's worker takes these runs
    extra = {"REDIS_PREFIX": f"{REDIS_PREFIX}:", **({"DATABASE_URL": str(db)} if isinstance(db, str) else {})}
    manage(tmp_path, "migrate", "--noinput", **extra)
    manage(tmp_path, "demo_user", **extra)
    token = manage(tmp_path, "robotlab_token", "demo", **extra).stdout.strip().splitlines()[-1]
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "example_site", "worker", "--pool", "prefork",
                               "-c", "1", "--hostname", f"streams-{os.getpid()}@%h", "--without-gossip",
                               "--without-mingle", "--without-heartbeat", "--loglevel", "INFO"],
                              cwd=ROOT / "example_project", env=project_env(tmp_path, REDIS_URL=REDIS, **extra),
                              stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        with served_project(tmp_path, REDIS_URL=REDIS, **extra) as url:
            yield Site(url, token, db, worker)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
        log.close()
        drop()


def _acp(site: Site) -> Any:
    return acp_client.Client(base_url=f"{site.url}/acp", headers={"Authorization": f"Bearer {site.token}"},
                             timeout=WAIT)


@asynccontextmanager
async def _a2a(site: Site, agent: str) -> AsyncIterator[Any]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {site.token}"}, timeout=WAIT) as http:
        card = await a2a_client.A2ACardResolver(http, f"{site.url}/a2a/{agent}/").get_agent_card()
        client = a2a_client.ClientFactory(a2a_client.ClientConfig(httpx_client=http, streaming=True)).create(card)
        try:
            yield client
        finally:
            await client.close()


def _a2a_message(text: str) -> SendMessageRequest:
    return SendMessageRequest(message=Message(role=Role.ROLE_USER, message_id=f"m-{abs(hash(text))}",
                                              parts=[Part(text=text)]))


def _artifacts(events: list[StreamResponse]) -> dict[str, str]:
    """Each artifact's text as a client keeps it: chunks appended, a chunk with ``append`` false replacing."""
    texts: dict[str, str] = {}
    for event in events:
        if event.HasField("artifact_update"):
            update = event.artifact_update
            text = "".join(part.text for part in update.artifact.parts)
            name = update.artifact.artifact_id
            texts[name] = texts.get(name, "") + text if update.append else text
    return texts


def _acp_text(events: list[Any]) -> str:
    """The message text as an ACP client keeps it: the parts after the last ``message.created``."""
    text = ""
    for event in events:
        if event.type == "message.created":
            text = ""
        elif event.type == "message.part":
            text += event.part.content or ""
    return text


def _stored_parts(site: Site, run_id: Any) -> list[Any]:
    """``GET /runs/{id}/events`` as the acp-sdk models it."""
    response = httpx.get(f"{site.url}/acp/runs/{run_id}/events", headers={"Authorization": f"Bearer {site.token}"})
    assert response.status_code == 200, response.text
    events = response.json()["events"]
    return [acp_models.MessagePartEvent.model_validate(e) if e["type"] == "message.part"
            else acp_models.MessageCreatedEvent.model_validate(e) for e in events]


def _query(db: Path | str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    if isinstance(db, str):
        import psycopg

        with psycopg.connect(db) as connection:
            return connection.execute(sql.replace("?", "%s"), args).fetchall()
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, args).fetchall()


def _row(db: Path | str, run_id: str) -> dict[str, Any]:
    [(pk, status, reply, attempts)] = _query(db, "SELECT id, status, reply, attempts FROM robotlab_robotresult "
                                                 "WHERE run_id = ?", run_id.replace("-", ""))
    tasks = _query(db, "SELECT id, task_name, status, reply FROM robotlab_robotresult WHERE parent_id = ? "
                       "ORDER BY id", pk)
    return {"pk": pk, "run_id": run_id.replace("-", ""), "status": status, "reply": reply, "attempts": attempts,
            "tasks": [{"pk": t[0], "task": t[1], "status": t[2], "reply": t[3]} for t in tasks]}


def _agui(site: Site, agent: str, body: dict[str, Any], last_event_id: str | None = None,
          until: int | None = None) -> list[tuple[str | None, dict[str, Any]]]:
    """The ``(id, event)`` frames of an AG-UI stream (until ``until`` text deltas came, then the connection closes)."""
    headers = {"Authorization": f"Bearer {site.token}", **({"Last-Event-ID": last_event_id} if last_event_id else {})}
    found: list[tuple[str | None, dict[str, Any]]] = []
    ident = None
    with httpx.stream("POST", f"{site.url}/agui/{agent}", json=body, headers=headers, timeout=WAIT) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id: "):
                ident = line[len("id: "):]
            elif line.startswith("data: "):
                found.append((ident, json.loads(line[len("data: "):])))
                if until is not None and sum(e["type"] == "TEXT_MESSAGE_CONTENT" for _, e in found) >= until:
                    break
    return found


def _agui_text(events: list[dict[str, Any]], subagent: str | None = None) -> str:
    return "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT"
                   and (subagent is None or event.get("subagentRunId") == subagent))


def test_an_agui_turn_streams_each_task_from_its_row_and_a_dropped_stream_goes_on_exactly(site: Site) -> None:
    body = {"threadId": "agui-turn", "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": "I was charged twice on my invoice"}]}
    first = _agui(site, "support", body, until=3)
    rest = _agui(site, "support", body, first[-1][0])
    events = [event for _, event in first + rest]
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "success"}
    turn = _row(site.db, events[0]["metadata"]["robotlab"]["runId"])
    assert [t["task"] for t in turn["tasks"]] == ["classifier", "billing"]  # one row per task: distributed
    subagents = [event["subagentRunId"] for event in events if event["type"] == "SUBAGENT_STARTED"]
    assert [_agui_text(events, subagent) for subagent in subagents] == [t["reply"] for t in turn["tasks"]]
    assert sum(event["type"] == "TEXT_MESSAGE_CONTENT" for event in events) > 3  # streamed as it came
    whole = _agui(site, "support", body, f"{turn['run_id']}:0:s3:")
    assert [event for _, event in whole] == events[3:]  # read again from the stored events: the same stream


def test_a_network_streams_each_task_over_acp_and_a2a_under_celery(site: Site) -> None:
    async def main() -> tuple[list[Any], list[StreamResponse]]:
        async with _acp(site) as client:
            acp = [event async for event in client.run_stream("I was charged twice on my invoice", agent="support")]
        async with _a2a(site, "support") as client:
            a2a = [event async for event in client.send_message(_a2a_message("The app crashes with an error"))]
        return acp, a2a

    acp, a2a = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert acp[-1].type == "run.completed"
    turn = _row(site.db, str(acp[-1].run.run_id))
    assert [t["task"] for t in turn["tasks"]] == ["classifier", "billing"]  # one row per task: distributed
    parts = [event for event in acp if event.type == "message.part"]
    assert len(parts) > 2  # streamed as it came, not one piece at the end
    assert acp.index(parts[0]) < next(i for i, e in enumerate(acp) if e.type == "message.completed")
    assert _acp_text(acp) == "".join(t["reply"] for t in turn["tasks"])  # each task's text, exactly
    assert _acp_text(_stored_parts(site, acp[-1].run.run_id)) == _acp_text(acp)  # and GET /runs/{id}/events too
    assert turn["reply"] == turn["tasks"][-1]["reply"] and turn["reply"]
    assert "".join(part.content for part in acp[-1].run.output[0].parts) == turn["reply"]

    assert a2a[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    turn = _row(site.db, a2a[0].task.id)
    chunks = [event for event in a2a if event.HasField("artifact_update")
              and event.artifact_update.artifact.artifact_id.startswith("task-")]
    assert len(chunks) > 2
    assert _artifacts(a2a) == {"task-classifier": turn["tasks"][0]["reply"],
                               "task-technical": turn["tasks"][1]["reply"], "reply": turn["reply"]}


def test_a_stream_across_a_killed_worker_joins_to_the_stored_reply(site: Site) -> None:
    """SIGKILL the pool child mid-stream: the run is executed again from the start (attempts 2); neither the ACP
    stream nor an A2A subscriber sends the text of the first attempt twice."""
    story = "Tell me a long story about " + " ".join(f"word{n}" for n in range(150))

    async def main() -> tuple[list[Any], list[StreamResponse], list[int]]:
        acp: list[Any] = []
        killed: list[int] = []
        subscriber: asyncio.Task[list[StreamResponse]] | None = None

        async def subscribe(task_id: str) -> list[StreamResponse]:
            async with _a2a(site, "chat") as client:
                return [event async for event in client.subscribe(SubscribeToTaskRequest(id=task_id))]

        async with _acp(site) as client:
            async for event in client.run_stream(story, agent="chat"):
                acp.append(event)
                if event.type == "run.created":
                    subscriber = asyncio.ensure_future(subscribe(str(event.run.run_id)))
                if event.type == "message.part" and not killed and "word20" in _acp_text(acp):
                    killed = children(site.worker.pid)
                    for pid in killed:
                        os.kill(pid, signal.SIGKILL)
        assert subscriber is not None
        return acp, await subscriber, killed

    acp, a2a, killed = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert killed and acp[-1].type == "run.completed"
    run = _row(site.db, str(acp[-1].run.run_id))
    assert run["attempts"] == 2 and run["status"] == "completed"
    joined = "".join(event.part.content for event in acp if event.type == "message.part")
    assert joined == _acp_text(acp) == run["reply"]  # nothing sent twice, and nothing to take back
    stored = _stored_parts(site, acp[-1].run.run_id)
    assert "".join(event.part.content for event in stored if event.type == "message.part") == run["reply"]
    assert a2a[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert _artifacts(a2a)["reply"] == run["reply"]
    [restarts] = _query(site.db, "SELECT count(*) FROM robotlab_runevent WHERE result_id = ? AND kind = ?",
                        run["pk"], "run.started")
    assert restarts == (2,)  # the run did stream twice
    # the AG-UI door reads the same run (from just after its start, as a reconnect would): one message, nothing twice
    body = {"threadId": str(acp[-1].run.session_id), "runId": "read",
            "messages": [{"id": "u", "role": "user", "content": story}]}
    events = [event for _, event in _agui(site, "chat", body, f"{run['run_id']}:0:s3:")]
    assert [event["type"] for event in events].count("TEXT_MESSAGE_START") == 1
    assert _agui_text(events) == run["reply"] and events[-1]["outcome"] == {"type": "success"}


def test_a_network_turn_across_a_killed_worker_streams_each_task_live_and_joins_exactly(site: Site) -> None:
    """A2A: a network turn's specialist streams while its row is still running (live, not replayed at the end); its
    pool child is SIGKILLed mid-stream and the client's stream dropped there; ``SubscribeToTask`` then yields the
    rest, and the artifacts end as exactly the stored replies (the task's new attempt sends nothing twice), as
    ACP's stored events of the same run do."""
    message = "I need a refund for my invoice: " + " ".join(f"item{n}" for n in range(200))

    async def main() -> tuple[list[StreamResponse], list[StreamResponse], list[int], str]:
        left: list[StreamResponse] = []
        killed: list[int] = []
        status = ""
        async with _a2a(site, "support") as client:
            async for event in client.send_message(_a2a_message(message)):
                left.append(event)
                billing = _artifacts(left).get("task-billing", "")
                if "item20" in billing:
                    turn = _row(site.db, left[0].task.id)
                    status = next(t["status"] for t in turn["tasks"] if t["task"] == "billing")
                    killed = children(site.worker.pid)
                    for pid in killed:
                        os.kill(pid, signal.SIGKILL)
                    break  # the client's stream drops with the worker
            again = [event async for event in client.subscribe(SubscribeToTaskRequest(id=left[0].task.id))]
        return left, again, killed, status

    left, again, killed, status = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert killed and status == "running"  # the text came while the task was still answering
    assert again[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    turn = _row(site.db, left[0].task.id)
    classifier, billing = turn["tasks"]
    assert (classifier["task"], billing["task"], turn["status"]) == ("classifier", "billing", "completed")
    [(attempts,)] = _query(site.db, "SELECT attempts FROM robotlab_robotresult WHERE id = ?", billing["pk"])
    [(restarts,)] = _query(site.db, "SELECT count(*) FROM robotlab_runevent WHERE result_id = ? AND kind = ?",
                           billing["pk"], "step.started")
    assert attempts == 2 and restarts == 2  # the specialist did stream twice
    assert "item199" in billing["reply"] and billing["reply"].count("item20 ") == 1
    expected = {"task-classifier": classifier["reply"], "task-billing": billing["reply"], "reply": turn["reply"]}
    assert _artifacts(again) == expected  # the subscription alone: exactly the stored text
    assert _artifacts(left + again) == expected  # and joined to what the dropped stream had sent
    billing_chunks = [e for e in again if e.HasField("artifact_update")
                      and e.artifact_update.artifact.artifact_id == "task-billing"]
    assert not any(chunk.artifact_update.append is False for chunk in billing_chunks[1:])  # nothing to take back
    stored = _stored_parts(site, left[0].task.id)  # ACP reads the same run: each task's text once
    assert _acp_text(stored) == classifier["reply"] + billing["reply"]


def test_acp_streams_a_network_task_while_its_row_is_running(site: Site) -> None:
    """ACP under Celery: a specialist's text arrives while its task row is still running, not once the turn ends."""
    message = "I need a refund for my invoice: " + " ".join(f"item{n}" for n in range(200))

    async def main() -> tuple[list[Any], str]:
        events: list[Any] = []
        status = ""
        async with _acp(site) as client:
            async for event in client.run_stream(message, agent="support"):
                events.append(event)
                if not status and event.type == "message.part" and "item20" in _acp_text(events):
                    run_id = next(e.run.run_id for e in events if e.type == "run.created")
                    status = next(t["status"] for t in _row(site.db, str(run_id))["tasks"] if t["task"] == "billing")
        return events, status

    events, status = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert status == "running" and events[-1].type == "run.completed"
    turn = _row(site.db, str(events[-1].run.run_id))
    assert _acp_text(events) == "".join(t["reply"] for t in turn["tasks"]) and "item199" in turn["reply"]


def test_a_cancelled_network_turn_keeps_what_its_task_streamed(site: Site) -> None:
    message = "I need a refund for my invoice: " + " ".join(f"item{n}" for n in range(300))

    async def main() -> tuple[list[Any], Any]:
        async with _acp(site) as client, _acp(site) as control:
            events: list[Any] = []
            run_id = None
            async for event in client.run_stream(message, agent="support"):
                events.append(event)
                if run_id is None and event.type == "message.part" and "item30" in _acp_text(events):
                    run_id = next(e.run.run_id for e in events if e.type == "run.created")
                    await control.run_cancel(run_id=run_id)
            assert run_id is not None
            return events, await control.run_status(run_id=run_id)

    events, run = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert events[-1].type == "run.cancelled" and run.status.value == "cancelled"
    turn = _row(site.db, str(run.run_id))
    classifier, billing = turn["tasks"]
    assert (classifier["task"], classifier["status"], billing["task"], billing["status"]) == (
        "classifier", "completed", "billing", "cancelled")
    assert turn["status"] == "cancelled"
    assert billing["reply"] and "item30" in billing["reply"] and "item299" not in billing["reply"]
    assert turn["reply"] == billing["reply"]  # the turn keeps the text of its task that was answering
    assert "".join(part.content for message in run.output for part in message.parts) == turn["reply"]
    assert _acp_text(events) == classifier["reply"] + billing["reply"]  # the stream: exactly what was stored
    kinds = [kind for (kind,) in _query(site.db, "SELECT kind FROM robotlab_runevent WHERE result_id = ? "
                                                 "ORDER BY id", billing["pk"])]
    assert kinds.count("run.cancelled") == 1 and kinds[-1] == "stream.ended"
    [(data,)] = _query(site.db, "SELECT data FROM robotlab_runevent WHERE result_id = ? AND kind = ?", turn["pk"],
                       "run.cancelled")
    announced = data if isinstance(data, dict) else json.loads(data)  # jsonb arrives decoded
    assert announced["reply"] == turn["reply"]  # a page ends with exactly the stored text
