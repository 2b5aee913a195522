"""End-to-end on PostgreSQL: a NUL in a model's reply and in a user's input, through the official ``acp-sdk`` and
``a2a-sdk`` clients (issue 26, 1).

The example project runs under ``runserver`` (daphne) on a PostgreSQL database of its own, on a real model setting
(``openai/gpt-4o-mini`` through litellm) whose API base is a :class:`robotlab.testing.FakeLLMServer` replying with a
NUL and a lone surrogate. Before, the run wedged ``running`` (its events and its result refused by PostgreSQL) and a
NUL in the input was a 500 page; now both are stored with U+FFFD and the streams join to the stored reply.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from robotlab.testing.server import FakeLLMServer, reply
from tests.example_project.test_example_project import manage, served_project

psycopg = pytest.importorskip("psycopg")
acp_client = pytest.importorskip("acp_sdk.client")
a2a_client = pytest.importorskip("a2a.client")
httpx = pytest.importorskip("httpx")
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest, TaskState  # noqa: E402

#: What the model replies: a NUL and a lone surrogate, which PostgreSQL refuses as they are.
REPLY = "Got it\x00 and \ud800 done."
STORED_REPLY = "Got it\ufffd and \ufffd done."


@dataclass
class Site:
    """The served example project on PostgreSQL: its base URL, a token of ``demo``, and its database URL."""

    url: str
    token: str
    database_url: str

    def row(self, run_id: str) -> tuple[str, str, str]:
        """The stored ``(status, input, reply)`` of the run ``run_id`` (a UUID, with or without dashes)."""
        with psycopg.connect(self.database_url) as connection:
            found = connection.execute("SELECT status, input, reply FROM robotlab_robotresult WHERE run_id = %s",
                                       (run_id.replace("-", ""),)).fetchone()
        assert found is not None, f"no row for run {run_id}"
        return str(found[0]), str(found[1]), str(found[2])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The example project on a fresh PostgreSQL database, its model the fake server."""
    server_url = "postgres://postgres@127.0.0.1:5432"
    try:
        admin = psycopg.connect(f"{server_url}/postgres", autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 cannot be reached: {exc}")
    name = f"robotlab_e2e_text_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    tmp_path = tmp_path_factory.mktemp("unstorable")
    try:
        with FakeLLMServer(default=reply(REPLY)) as model:
            env = {"DATABASE_URL": f"{server_url}/{name}", "ROBOT_LAB_MODEL": "openai/gpt-4o-mini",
                   "ROBOT_LAB_LLM__API_BASE": model.base_url, "OPENAI_API_KEY": "sk-fake"}
            manage(tmp_path, "migrate", "--noinput", **env)
            manage(tmp_path, "demo_user", **env)
            token = manage(tmp_path, "robotlab_token", "demo", **env).stdout.strip().splitlines()[-1]
            with served_project(tmp_path, **env) as url:
                yield Site(url, token, env["DATABASE_URL"])
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _acp(site: Site) -> Any:
    return acp_client.Client(base_url=f"{site.url}/acp", headers={"Authorization": f"Bearer {site.token}"},
                             timeout=30)


def _text(run: Any) -> str:
    return "".join(part.content or "" for message in run.output for part in message.parts)


def test_acp_a_nul_in_the_reply_and_in_the_input_completes_and_streams_the_stored_text(site: Site) -> None:
    async def main() -> tuple[Any, list[Any], Any]:
        async with _acp(site) as client:
            run = await client.run_sync("Hello\x00 there", agent="chat")
            events = [event async for event in client.run_stream("Once more\x00", agent="chat")]
            final = await client.run_status(run_id=events[-1].run.run_id)
            return run, events, final

    run, events, final = asyncio.run(main())
    assert run.status.value == "completed" and _text(run) == STORED_REPLY
    assert site.row(str(run.run_id)) == ("completed", "Hello\ufffd there", STORED_REPLY)
    assert events[-1].type == "run.completed" and final.status.value == "completed"
    streamed = "".join(event.part.content for event in events if event.type == "message.part")
    assert streamed == STORED_REPLY == site.row(str(final.run_id))[2]


def test_a2a_a_nul_in_the_reply_and_in_the_input_completes_and_streams_the_stored_text(site: Site) -> None:
    async def main() -> list[Any]:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {site.token}"}, timeout=30) as http:
            card = await a2a_client.A2ACardResolver(http, f"{site.url}/a2a/chat/").get_agent_card()
            client = a2a_client.ClientFactory(a2a_client.ClientConfig(httpx_client=http, streaming=True)).create(card)
            try:
                message = Message(role=Role.ROLE_USER, message_id="m-nul", parts=[Part(text="Hi\x00 agent")])
                return [event async for event in client.send_message(SendMessageRequest(message=message))]
            finally:
                await client.close()

    events = asyncio.run(main())
    assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    task_id = events[-1].status_update.task_id
    streamed = "".join(part.text for event in events if event.HasField("artifact_update")
                       for part in event.artifact_update.artifact.parts)
    assert site.row(task_id) == ("completed", "Hi\ufffd agent", STORED_REPLY)
    assert streamed == STORED_REPLY

