"""End-to-end: the official ``acp-sdk`` client (PyPI) against the example project's ACP server under daphne."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.example_project.test_example_project import ROOT, manage, project_env, served_project

acp_client = pytest.importorskip("acp_sdk.client")
acp_models = pytest.importorskip("acp_sdk.models")


@pytest.fixture(scope="module")
def acp_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """The example project under daphne (in-process executor, demo model): its ACP base URL, a token of the
    demo user, and the SQLite database path."""
    tmp_path = tmp_path_factory.mktemp("acp")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    with served_project(tmp_path) as url:
        yield f"{url}/acp", token, tmp_path / "db.sqlite3"


def _client(site: tuple[str, str, Path], token: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {token or site[1]}"} if token != "" else {}
    return acp_client.Client(base_url=site[0], headers=headers, timeout=30)


def _text(run: Any) -> str:
    return "".join(part.content or "" for message in run.output for part in message.parts)


def _stored_reply(db: Path, run_id: Any) -> str:
    with sqlite3.connect(db) as connection:
        row = connection.execute("SELECT reply FROM robotlab_robotresult WHERE run_id = ?",
                                 (run_id.hex,)).fetchone()
    assert row is not None, f"no row for run {run_id}"
    return str(row[0])


def test_agents_list_the_chat_robot_and_the_support_network(acp_site: tuple[str, str, Path]) -> None:
    async def main() -> list[str]:
        async with _client(acp_site) as client:
            return [agent.name async for agent in client.agents()]

    names = asyncio.run(main())
    assert "chat" in names and "support" in names


def test_no_or_a_bad_token_is_401(acp_site: tuple[str, str, Path]) -> None:
    import httpx

    for headers in ({}, {"Authorization": "Bearer rl_not-a-token"}):
        response = httpx.get(f"{acp_site[0]}/agents", headers=headers)
        assert response.status_code == 401
        assert response.json()["code"] == "unauthorized"

    async def main() -> None:
        async with _client(acp_site, "") as client:
            with pytest.raises(acp_models.ACPError):
                await client.run_sync("hello", agent="chat")

    asyncio.run(main())


def test_run_sync_returns_the_reply_and_run_stream_parts_join_to_the_stored_reply(
        acp_site: tuple[str, str, Path]) -> None:
    async def main() -> tuple[Any, list[Any]]:
        async with _client(acp_site) as client:
            run = await client.run_sync("What is 6 times 7?", agent="chat")
            events = [event async for event in client.run_stream("Tell me about robots", agent="chat")]
            return run, events

    run, events = asyncio.run(main())
    assert str(run.status) == "completed" or run.status.value == "completed"
    assert _text(run) and _text(run) == _stored_reply(acp_site[2], run.run_id)
    parts = [event.part.content for event in events if event.type == "message.part"]
    final = events[-1]
    assert final.type == "run.completed"
    assert len(parts) > 1
    assert "".join(parts) == _stored_reply(acp_site[2], final.run.run_id)


def test_run_async_then_polling_reaches_completed(acp_site: tuple[str, str, Path]) -> None:
    async def main() -> Any:
        async with _client(acp_site) as client:
            run = await client.run_async("Hello there", agent="chat")
            deadline = time.monotonic() + 30
            while not run.status.is_terminal:
                assert time.monotonic() < deadline, f"still {run.status}"
                await asyncio.sleep(0.05)
                run = await client.run_status(run_id=run.run_id)
            return run

    run = asyncio.run(main())
    assert run.status.value == "completed"
    assert _text(run) == _stored_reply(acp_site[2], run.run_id)


def test_ask_user_awaits_and_resume_completes_with_the_answer(acp_site: tuple[str, str, Path]) -> None:
    async def main() -> tuple[Any, Any]:
        async with _client(acp_site) as client:
            asked = await client.run_sync("Ask the user which plan suits them", agent="concierge")
            answer = acp_models.MessageAwaitResume(message=acp_models.Message(
                role="user", parts=[acp_models.MessagePart(content="the pro plan")]))
            done = await client.run_resume_sync(answer, run_id=asked.run_id)
            return asked, done

    asked, done = asyncio.run(main())
    assert asked.status.value == "awaiting"
    assert "which plan suits them" in json.dumps(asked.await_request.model_dump(mode="json"))
    assert done.status.value == "completed"
    assert "the pro plan" in _text(done)


def test_another_users_run_is_not_found(acp_site: tuple[str, str, Path]) -> None:
    other = manage(acp_site[2].parent, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    assert other != acp_site[1]
    import httpx

    response = httpx.get(f"{acp_site[0]}/runs/00000000-0000-0000-0000-000000000000",
                         headers={"Authorization": f"Bearer {other}"})
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_run_cancel_on_a_streaming_run_ends_it_cancelled(acp_site: tuple[str, str, Path]) -> None:
    async def main() -> tuple[list[Any], Any]:
        async with _client(acp_site) as client, _client(acp_site) as control:
            events: list[Any] = []
            # the demo model repeats the message, a word every 20 ms: some 6 s of reply, the cancel comes at its start
            story = "Tell me a long story about " + " ".join(f"robot{n}" for n in range(300))
            async for event in client.run_stream(story, agent="chat"):
                events.append(event)
                if event.type == "message.part" and sum(e.type == "message.part" for e in events) == 1:
                    run_id = next(e.run.run_id for e in events if e.type == "run.created")
                    cancelled = await control.run_cancel(run_id=run_id)
                    assert cancelled.status.value in ("cancelling", "cancelled")
            return events, await control.run_status(run_id=run_id)

    events, run = asyncio.run(main())
    assert events[-1].type == "run.cancelled"
    assert run.status.value == "cancelled"
    streamed = "".join(e.part.content for e in events if e.type == "message.part")
    assert streamed and streamed.startswith(_stored_reply(acp_site[2], run.run_id))
    assert "robot299" not in streamed  # it stopped long before the end


def test_the_docs_client_snippet_runs(acp_site: tuple[str, str, Path]) -> None:
    page = (ROOT / "docs" / "django" / "acp.md").read_text()
    snippet = page.split("## A client", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**project_env(acp_site[2].parent), "ROBOTLAB_TOKEN": acp_site[1], "ACP_URL": acp_site[0]}
    done = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "'chat'" in lines[0] and lines[1].startswith("completed ") and len(lines[2]) > 10


def _thread_ids(db: Path, run_ids: list[Any]) -> list[int]:
    with sqlite3.connect(db) as connection:
        return [connection.execute("SELECT thread_id FROM robotlab_robotresult WHERE run_id = ?",
                                   (run_id.hex,)).fetchone()[0] for run_id in run_ids]


def test_a_client_session_runs_on_one_thread_and_reads_its_history(acp_site: tuple[str, str, Path]) -> None:
    """Issue 26 (7): ``client.session()`` reads ``/sessions/{id}`` (the bare session), then runs on its thread."""
    async def main() -> tuple[Any, Any, Any, list[Any]]:
        async with _client(acp_site) as client, client.session() as session:
            first = await session.run_sync("My name is Ada", agent="chat")
            second = await session.run_sync("Hello again", agent="chat")
            read = await session.refresh_session()
            history = [message async for message in read.load_history()]
            return first, second, read, history

    first, second, read, history = asyncio.run(main())
    assert first.status.value == second.status.value == "completed"
    assert first.session_id == second.session_id == read.id
    first_thread, second_thread = _thread_ids(acp_site[2], [first.run_id, second.run_id])
    assert first_thread == second_thread
    assert [(message.role, str(message)) for message in history] == [
        ("user", "My name is Ada"), ("agent", _stored_reply(acp_site[2], first.run_id)),
        ("user", "Hello again"), ("agent", _stored_reply(acp_site[2], second.run_id))]
    import httpx

    headers = {"Authorization": f"Bearer {acp_site[1]}"}
    wrapped = httpx.get(f"{acp_site[0]}/session/{read.id}", headers=headers).json()  # the earlier path still works
    assert wrapped["session"]["id"] == str(read.id) and len(wrapped["session"]["history"]) == 4
    missing = httpx.get(f"{acp_site[0]}/sessions/{uuid.uuid4()}", headers=headers)
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    forged = httpx.get(str(read.history[0]).rsplit("/", 1)[0] + "/not-a-signed-token")
    assert forged.status_code == 404 and forged.json()["code"] == "not_found"
