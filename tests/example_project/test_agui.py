"""End-to-end: the example project's AG-UI endpoint under daphne (in-process executor, the demo model streaming a
word every 20 ms), read by the official ``@ag-ui/client`` (run by node) and by a plain SSE reader.

* ``HttpAgent`` runs a tool round, a network turn and a parked run, then resumes it; it checks every event as it
  arrives (its ``verifyEvents``), and every event is parsed again here by the ``ag-ui-protocol`` models.
* A stream dropped mid-reply and reconnected with ``Last-Event-ID`` joins to the stored reply exactly.
* A cancel request ends a streaming run as the chat page's cancel does.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.example_project.test_example_project import ROOT, manage, project_env, served_project

httpx = pytest.importorskip("httpx")
ag_ui = pytest.importorskip("ag_ui.core")
from pydantic import TypeAdapter  # noqa: E402

CLIENT = Path(__file__).resolve().parent / "agui_client"
EVENT = TypeAdapter(ag_ui.Event)
#: Seconds any wait of these tests may take.
WAIT = 60.0


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """The example project under daphne: its AG-UI base URL, a token of the demo user, the SQLite database."""
    tmp_path = tmp_path_factory.mktemp("agui")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
    with served_project(tmp_path) as url:
        yield f"{url}/agui", token, tmp_path / "db.sqlite3"


def _stored_reply(db: Path, run_id: str) -> str:
    with sqlite3.connect(db) as connection:
        row = connection.execute("SELECT reply FROM robotlab_robotresult WHERE run_id = ?",
                                 (uuid.UUID(run_id).hex,)).fetchone()
    assert row is not None, f"no row for run {run_id}"
    return str(row[0])


def _node_client() -> Path:
    """The installed ``@ag-ui/client`` (``npm ci`` in tests/example_project/agui_client when it is missing)."""
    if shutil.which("node") is None:
        pytest.skip("needs node (18 or later) to run @ag-ui/client")
    if not (CLIENT / "node_modules" / "@ag-ui" / "client").is_dir():
        npm = shutil.which("npm")
        done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=CLIENT, capture_output=True, text=True,
                              timeout=300) if npm else None
        if done is None or done.returncode != 0:
            pytest.skip(f"@ag-ui/client is not installed (npm ci in {CLIENT}): {done.stderr if done else 'no npm'}")
    return CLIENT / "run.mjs"


def _parsed(events: list[dict[str, Any]]) -> list[str]:
    for event in events:
        EVENT.validate_python(event)
    return [event["type"] for event in events]


def test_the_official_client_runs_a_tool_round_a_network_turn_and_a_parked_run(site: tuple[str, str, Path]) -> None:
    script = _node_client()
    env = {**os.environ, "AGUI_URL": site[0], "ROBOTLAB_TOKEN": site[1]}
    done = subprocess.run(["node", str(script)], env=env, capture_output=True, text=True, timeout=WAIT * 2)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])

    tool_round = out["tool_round"]
    kinds = _parsed(tool_round["events"])
    assert {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"} <= set(kinds)
    assert kinds[-1] == "RUN_FINISHED" and tool_round["result"] == "I asked my tools: calculate returned 84."
    roles = [message["role"] for message in tool_round["messages"]]
    assert roles[0] == "user" and "tool" in roles and tool_round["messages"][-1]["content"] == tool_round["result"]

    network = out["network"]
    kinds = _parsed(network["events"])
    steps = [event["stepName"] for event in network["events"] if event["type"] == "STEP_STARTED"]
    assert steps == ["classifier", "billing"] and kinds.count("SUBAGENT_STARTED") == 2
    attributed = {event.get("subagentRunId") for event in network["events"] if event["type"] == "TEXT_MESSAGE_CONTENT"}
    assert len(attributed) == 2 and None not in attributed

    parked = out["parked"]
    _parsed(parked["events"])
    finished = parked["events"][-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    interrupt, = parked["pendingInterrupts"]
    assert interrupt["reason"] == "input_required" and "plan" in interrupt["message"]
    resumed = out["resumed"]
    kinds = _parsed(resumed["events"])
    assert kinds[0] == "RUN_STARTED" and "MESSAGES_SNAPSHOT" not in kinds and "TOOL_CALL_START" not in kinds
    assert resumed["events"][-1]["outcome"] == {"type": "success"} and "the pro plan" in resumed["result"]
    assert not resumed["pendingInterrupts"]
    answer = next(message for message in resumed["messages"] if message["role"] == "tool")
    assert answer["content"] == "the pro plan" and answer["toolCallId"] == interrupt["toolCallId"]


def _read(lines: Iterator[str], until: int | None = None) -> tuple[list[tuple[str | None, dict[str, Any]]], bool]:
    """The ``(id, event)`` frames of an open stream's lines; with ``until``, only until that many text deltas came."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    ident: str | None = None
    deltas = 0
    for line in lines:
        if line.startswith("id: "):
            ident = line[len("id: "):]
        elif line.startswith("data: "):
            event = json.loads(line[len("data: "):])
            found.append((ident, event))
            ident = None
            deltas += event["type"] == "TEXT_MESSAGE_CONTENT"
            if until is not None and deltas >= until:
                return found, False
    return found, True


STORY = "Tell me a long story about " + " ".join(f"robot{n}" for n in range(120))


def test_a_stream_dropped_mid_reply_reconnects_to_the_stored_reply_exactly(site: tuple[str, str, Path]) -> None:
    url, token, db = site
    headers = {"Authorization": f"Bearer {token}"}
    body = {"threadId": "reconnect", "runId": "r1", "messages": [{"id": "u1", "role": "user", "content": STORY}]}
    with httpx.stream("POST", f"{url}/chat", json=body, headers=headers, timeout=WAIT) as response:
        assert response.status_code == 200
        first, ended = _read(response.iter_lines(), until=5)
    assert not ended  # the connection is closed mid-reply
    last = first[-1][0]
    assert last is not None
    with httpx.stream("POST", f"{url}/chat", json=body, headers={**headers, "Last-Event-ID": last},
                      timeout=WAIT) as response:
        rest, ended = _read(response.iter_lines())
    assert ended and rest[0][1]["type"] == "TEXT_MESSAGE_CONTENT"  # the next delta, not the run's start again
    events = [event for _, event in first + rest]
    _parsed(events)
    run_id = events[0]["metadata"]["robotlab"]["runId"]
    text = "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == _stored_reply(db, run_id) and "robot119" in text
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == text


def test_a_cancel_request_ends_a_streaming_run_with_the_text_it_kept(site: tuple[str, str, Path]) -> None:
    url, token, db = site
    headers = {"Authorization": f"Bearer {token}"}
    body = {"threadId": "cancel", "runId": "r1", "messages": [{"id": "u1", "role": "user", "content": STORY}]}
    with httpx.stream("POST", f"{url}/chat", json=body, headers=headers, timeout=WAIT) as response:
        lines = response.iter_lines()
        first, _ = _read(lines, until=1)
        cancelled = httpx.post(f"{url}/chat/cancel", json={"threadId": "cancel"}, headers=headers, timeout=WAIT)
        assert cancelled.status_code == 202, cancelled.text
        rest, ended = _read(lines)
    events = [event for _, event in first + rest]
    _parsed(events)
    assert ended and events[-1]["type"] == "RUN_FINISHED" and events[-1]["outcome"] == {"type": "cancelled"}
    run_id = events[0]["metadata"]["robotlab"]["runId"]
    assert cancelled.json()["cancelled"] == [run_id]
    text = "".join(event["delta"] for event in events if event["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == _stored_reply(db, run_id) and "robot119" not in text  # stopped long before the end


def test_the_docs_client_snippet_runs(site: tuple[str, str, Path]) -> None:
    page = (ROOT / "docs" / "django" / "agui.md").read_text()
    snippet = page.split("With Python (`httpx`)", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    env = {**project_env(site[2].parent), "ROBOTLAB_TOKEN": site[1], "AGUI_URL": f"{site[0]}/chat"}
    done = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True, text=True, timeout=WAIT)
    assert done.returncode == 0, done.stderr
    assert "robot" in done.stdout.lower() and len(done.stdout) > 20
