"""End-to-end: the official ``mcp`` client (PyPI) against the example project's MCP endpoint, served by two daphne
processes on one database, its requests alternating between them without a session (issue 29, item 4)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.example_project.test_example_project import ROOT, manage, project_env, served_project
from tests.robotlab_django.settings import REDIS_PREFIX

pytest.importorskip("mcp.client")
import httpx2  # noqa: E402
import mcp_types as types  # noqa: E402
from mcp.client import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

#: A message the demo model answers slowly (it repeats it, a word every 20 ms: some 6 s).
STORY = "Tell me a long story about " + " ".join(f"robot{n}" for n in range(300))


@dataclass
class Site:
    """Two web processes of the example project on one database: their base URLs, tokens of two users."""

    urls: list[str]
    token: str
    other_token: str
    db: Path
    logs: list[Path] = field(default_factory=list)


@pytest.fixture(scope="module")
def mcp_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """The example project under two daphne processes (in-process executor, demo model) sharing one database."""
    tmp_path = tmp_path_factory.mktemp("mcp")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    other = manage(tmp_path, "robotlab_token", "admin").stdout.strip().splitlines()[-1]
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    with ExitStack() as stack:
        dirs = [tmp_path / name for name in ("web1", "web2")]
        urls = []
        for folder in dirs:
            folder.mkdir()
            urls.append(stack.enter_context(served_project(folder, DATABASE_URL=database)))
        yield Site(urls, token, other, tmp_path / "db.sqlite3", [folder / "server.log" for folder in dirs])


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request to the next web process in turn (what a load balancer without affinity does)."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.sent = ports, [0] * len(ports)
        self.session_ids: list[str] = []  # what any answer said in an Mcp-Session-Id header
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        index = sum(self.sent) % len(self.ports)
        self.sent[index] += 1
        request.url = request.url.copy_with(port=self.ports[index])
        response = await self.inner.handle_async_request(request)
        self.session_ids += response.headers.get_list("mcp-session-id")
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def _client(site: Site, *, token: str | None = None, transport: Alternating | None = None,
                  **options: Any) -> AsyncIterator[Client]:
    """An SDK client of the endpoint of the first process (``transport``: spread over both)."""
    headers = {"Authorization": f"Bearer {token or site.token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30, transport=transport) as http, \
            Client(streamable_http_client(f"{site.urls[0]}/mcp/", http_client=http), **options) as client:
        yield client


def _ports(site: Site) -> list[int]:
    return [int(url.rsplit(":", 1)[1]) for url in site.urls]


def _stored(db: Path, run_id: str) -> tuple[str, str]:
    with sqlite3.connect(db) as connection:
        row = connection.execute("SELECT status, reply FROM robotlab_robotresult WHERE run_id = ?",
                                 (run_id,)).fetchone()
    return str(row[0]), str(row[1])


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


def test_the_client_lists_and_calls_robots_through_two_processes_without_a_session(mcp_site: Site) -> None:
    transport = Alternating(_ports(mcp_site))

    async def main() -> tuple[list[str], list[types.CallToolResult]]:
        async with _client(mcp_site, transport=transport) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            results = [await client.call_tool("chat", {"message": f"Hello number {n}"}) for n in range(3)]
            return names, results

    names, results = asyncio.run(main())
    assert {"chat", "concierge", "orders", "support"} <= set(names)
    assert all(not result.is_error for result in results)
    assert [f"Hello number {n}" in _text(result) for n, result in enumerate(results)] == [True] * 3
    assert min(transport.sent) >= 2  # each process answered requests of the one client
    with sqlite3.connect(mcp_site.db) as connection:
        replies = [row[0] for row in connection.execute(
            "SELECT reply FROM robotlab_robotresult WHERE input LIKE 'Hello number %' ORDER BY id")]
    assert replies == [_text(result) for result in results]  # each call is a stored run
    assert transport.session_ids == []  # no session: nothing ties the client to a process
    for log in mcp_site.logs:
        assert "POST /mcp/ 200" in log.read_text()


class TaskCreated(types.Result):
    """A ``tools/call`` answered with a task (the Tasks extension's ``resultType: task``)."""

    result_type: str
    task: types.Task


async def _send(client: Client, request: Any, result: type[Any]) -> Any:
    return await client.session.send_request(request, result)


def test_a_long_run_is_a_task_polled_and_cancelled_on_either_process(mcp_site: Site) -> None:
    async def main() -> tuple[TaskCreated, types.GetTaskResult, types.CancelTaskResult, types.CallToolResult,
                              TaskCreated, types.CallToolResult]:
        async with _client(mcp_site, transport=Alternating(_ports(mcp_site))) as client:
            story = types.CallToolRequest(params=types.CallToolRequestParams(
                name="chat", arguments={"message": STORY}, task=types.TaskMetadata()))
            created = await _send(client, story, TaskCreated)
            task_id = created.task.task_id
            polled = await _send(client, types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)),
                                 types.GetTaskResult)
            cancelled = await _send(client, types.CancelTaskRequest(
                params=types.CancelTaskRequestParams(task_id=task_id)), types.CancelTaskResult)
            payload = await _send(client, types.GetTaskPayloadRequest(
                params=types.GetTaskPayloadRequestParams(task_id=task_id)), types.CallToolResult)
            with pytest.raises(MCPError, match="finished, nothing to cancel"):
                await _send(client, types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                            types.CancelTaskResult)
            short = types.CallToolRequest(params=types.CallToolRequestParams(
                name="chat", arguments={"message": "A short one"}, task=types.TaskMetadata()))
            second = await _send(client, short, TaskCreated)
            result = await _send(client, types.GetTaskPayloadRequest(
                params=types.GetTaskPayloadRequestParams(task_id=second.task.task_id)), types.CallToolResult)
        async with _client(mcp_site, token=mcp_site.other_token) as other:  # another user's task is not found
            with pytest.raises(MCPError, match=f"No task {task_id}"):
                await _send(other, types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)),
                            types.GetTaskResult)
            with pytest.raises(MCPError, match=f"No task {task_id}"):
                await _send(other, types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id)),
                            types.CancelTaskResult)
        return created, polled, cancelled, payload, second, result

    created, polled, cancelled, payload, second, result = asyncio.run(main())
    assert created.result_type == "task" and created.task.status == "working"
    assert polled.task_id == created.task.task_id and polled.status == "working"
    assert cancelled.status == "cancelled" and payload.is_error and "cancelled" in _text(payload)
    assert _stored(mcp_site.db, created.task.task_id)[0] == "cancelled"
    assert not result.is_error and _stored(mcp_site.db, second.task.task_id) == ("completed", _text(result))


def test_a_question_is_input_required_and_the_follow_up_answers_it(mcp_site: Site) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "the pro plan"})

    async def main() -> tuple[types.CallToolResult, types.InputRequiredResult, types.CallToolResult]:
        async with _client(mcp_site, transport=Alternating(_ports(mcp_site)), elicitation_callback=elicit) as client:
            driven = await client.call_tool("concierge", {"message": "Ask the user which plan suits them"})
            first = await client.session.call_tool("concierge", {"message": "Ask the user which colour they like"},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            async with _client(mcp_site, token=mcp_site.other_token) as other:
                with pytest.raises(MCPError, match="requestState names no run of yours"):
                    await other.session.call_tool("concierge", {"message": "x"}, allow_input_required=True,
                                                  input_responses={"answer": types.ElicitResult(
                                                      action="accept", content={"answer": "red"})},
                                                  request_state=first.request_state)
            done = await client.session.call_tool(
                "concierge", {"message": "Ask the user which colour they like"}, allow_input_required=True,
                input_responses={"answer": types.ElicitResult(action="accept", content={"answer": "green"})},
                request_state=first.request_state)
            assert isinstance(done, types.CallToolResult)
            return driven, first, done

    driven, first, done = asyncio.run(main())
    assert asked and "which plan suits them" in asked[0]
    assert not driven.is_error and "the pro plan" in _text(driven)
    request = (first.input_requests or {})["answer"]
    assert isinstance(request, types.ElicitRequest) and "which colour they like" in request.params.message
    assert not done.is_error and "green" in _text(done)
    assert _stored(mcp_site.db, str(first.request_state)) == ("completed", _text(done))


def test_a_change_to_approve_is_a_form_with_approve_or_deny(mcp_site: Site) -> None:
    forms: list[types.ElicitRequestFormParams] = []

    async def approve(context: Any, params: types.ElicitRequestFormParams) -> types.ElicitResult:
        forms.append(params)
        return types.ElicitResult(action="accept", content={"answer": "approve"})

    async def main() -> types.CallToolResult:
        async with _client(mcp_site, transport=Alternating(_ports(mcp_site)), elicitation_callback=approve) as client:
            return await client.call_tool("orders", {"message": "Change order 2 to shipped"})

    result = asyncio.run(main())
    assert len(forms) == 1 and forms[0].message.startswith('Approve update_order {"id": 2, "status": "shipped"}?')
    assert forms[0].requested_schema["properties"]["answer"]["enum"] == ["approve", "deny"]
    assert not result.is_error and '"status": "shipped"' in _text(result)
    with sqlite3.connect(mcp_site.db) as connection:
        assert connection.execute("SELECT status FROM orders_order WHERE number = 'A-1002'").fetchone()[0] == "shipped"


def test_a_client_of_the_2025_handshake_is_served_statelessly_too(mcp_site: Site) -> None:
    transport = Alternating(_ports(mcp_site))

    async def main() -> tuple[list[str], types.CallToolResult, types.CallToolResult]:
        async with _client(mcp_site, transport=transport, mode="legacy") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            reply = await client.call_tool("chat", {"message": "Hello from 2025"})
            question = await client.call_tool("concierge", {"message": "Ask the user which day suits them"})
            return names, reply, question

    names, reply, question = asyncio.run(main())
    assert "chat" in names and not reply.is_error and "Hello from 2025" in _text(reply)
    assert question.is_error and "which day suits them" in _text(question) and "2026-07-28" in _text(question)
    assert min(transport.sent) >= 2 and transport.session_ids == []


def test_bad_input_and_bad_tokens_get_clear_errors(mcp_site: Site) -> None:
    async def main() -> list[str]:
        errors = []
        async with _client(mcp_site) as client:
            for name, arguments in (("chat", {"nope": 1}), ("nobody", {"message": "hi"}),
                                    ("chat", {"message": "hi", "session": 3}), ("chat", {"message": " "})):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, arguments)
                assert raised.value.error.code == types.INVALID_PARAMS
                errors.append(raised.value.error.message)
            with pytest.raises(MCPError, match="No task nope"):
                await _send(client, types.GetTaskRequest(params=types.GetTaskRequestParams(task_id="nope")),
                            types.GetTaskResult)
        return errors

    errors = asyncio.run(main())
    assert "takes a 'message' string argument" in errors[0]
    assert "No tool nobody" in errors[1] and "'session' argument is a string" in errors[2]
    assert "empty" in errors[3]

    async def unauthorized() -> list[httpx2.Response]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=30) as http:
            return [await http.post(f"{mcp_site.urls[1]}/mcp/", json=body, headers={**headers, **extra})
                    for extra in ({}, {"Authorization": "Bearer rl_wrong"}, {"Authorization": "Bearer other"})]

    for response in asyncio.run(unauthorized()):
        assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith("Bearer")


def test_the_docs_client_snippet_runs(mcp_site: Site) -> None:
    page = (ROOT / "docs" / "django" / "mcp.md").read_text()
    snippet = page.split("## A client", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**project_env(mcp_site.db.parent), "ROBOTLAB_TOKEN": mcp_site.token, "MCP_URL": f"{mcp_site.urls[1]}/mcp/"}
    done = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "chat, concierge, orders, support"
    assert "You said: 'Hello there'" in lines[1]


#: Redis for the Celery site (its names carry this test run's prefix: another checkout's worker never takes its jobs).
CELERY_ENV = {"REDIS_URL": "redis://127.0.0.1:6379/11", "REDIS_PREFIX": f"{REDIS_PREFIX}:mcp:"}


@pytest.fixture(scope="module")
def mcp_celery_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Two daphne processes of the example project sending every run to a Celery worker process (Redis)."""
    pytest.importorskip("redis").Redis.from_url(CELERY_ENV["REDIS_URL"]).ping()
    tmp_path = tmp_path_factory.mktemp("mcp-celery")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    other = manage(tmp_path, "robotlab_token", "admin").stdout.strip().splitlines()[-1]
    env = {**CELERY_ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "example_site", "worker", "--pool", "solo",
                               "--hostname", "mcp-test@%h", "--without-gossip", "--without-mingle",
                               "--loglevel", "INFO"], cwd=ROOT / "example_project",
                              env=project_env(tmp_path, **env), stdout=log, stderr=subprocess.STDOUT)
    try:
        with ExitStack() as stack:
            dirs = [tmp_path / name for name in ("web1", "web2")]
            urls = []
            for folder in dirs:
                folder.mkdir()
                urls.append(stack.enter_context(served_project(folder, **env)))
            yield Site(urls, token, other, tmp_path / "db.sqlite3", [tmp_path / "worker.log"])
    finally:
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
        log.close()


def test_calls_and_a_question_run_on_a_celery_worker_through_two_processes(mcp_celery_site: Site) -> None:
    site = mcp_celery_site
    transport = Alternating(_ports(site))

    async def main() -> tuple[types.CallToolResult, types.InputRequiredResult, types.CallToolResult]:
        async with _client(site, transport=transport) as client:
            said = await client.call_tool("chat", {"message": "Hello from a worker"})
            first = await client.session.call_tool("concierge", {"message": "Ask the user which colour they like"},
                                                   allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            done = await client.session.call_tool(
                "concierge", {"message": "Ask the user which colour they like"}, allow_input_required=True,
                input_responses={"answer": types.ElicitResult(action="accept", content={"answer": "green"})},
                request_state=first.request_state)
            assert isinstance(done, types.CallToolResult)
            return said, first, done

    said, first, done = asyncio.run(main())
    assert not said.is_error and "Hello from a worker" in _text(said)
    assert not done.is_error and "green" in _text(done)
    assert _stored(site.db, str(first.request_state)) == ("completed", _text(done))
    assert transport.session_ids == [] and min(transport.sent) >= 2
    with sqlite3.connect(site.db) as connection:
        jobs = [row[0] for row in connection.execute("SELECT task_id FROM robotlab_robotresult")]
    log = site.logs[0].read_text()
    assert len(jobs) == 2 and all(job and f"[{job}] succeeded" in log for job in jobs), log  # the worker ran them
