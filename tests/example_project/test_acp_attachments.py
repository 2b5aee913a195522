"""End-to-end: an image part sent with the ``acp-sdk`` client reaches the model as an ``image_url`` content part.

The example project runs under ``runserver`` (daphne) on a real model setting, ``openai/gpt-4o-mini`` through litellm,
whose API base is a :class:`robotlab.testing.FakeLLMServer` in this process: the test reads the request bodies the
model received.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from robotlab.testing.server import FakeLLMServer, reply
from tests.example_project.test_example_project import MANAGE, ROOT, _free_port, manage, project_env

acp_client = pytest.importorskip("acp_sdk.client")
acp_models = pytest.importorskip("acp_sdk.models")

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path, FakeLLMServer]]:
    """The example project's ACP base URL, a token of the demo user, its database, and the fake model server."""
    tmp_path = tmp_path_factory.mktemp("acp-attachments")
    with FakeLLMServer(default=reply("A single dark dot.")) as model:
        env = {"ROBOT_LAB_MODEL": "openai/gpt-4o-mini", "ROBOT_LAB_LLM__API_BASE": model.base_url,
               "OPENAI_API_KEY": "sk-fake"}
        manage(tmp_path, "migrate", "--noinput")
        manage(tmp_path, "demo_user")
        token = manage(tmp_path, "robotlab_token", "demo").stdout.strip().splitlines()[-1]
        port = _free_port()
        log = (tmp_path / "server.log").open("w")
        server = subprocess.Popen([sys.executable, str(MANAGE), "runserver", "--noreload", f"127.0.0.1:{port}"],
                                  cwd=ROOT, env=project_env(tmp_path, **env), stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        pytest.fail("the server did not start:\n" + (tmp_path / "server.log").read_text())
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/acp", token, tmp_path / "db.sqlite3", model
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()


def test_an_image_part_reaches_the_model_as_an_image_url_part(
        site: tuple[str, str, Path, FakeLLMServer]) -> None:
    base_url, token, db, model = site
    message = acp_models.Message(parts=[
        acp_models.MessagePart(content="What is in this picture?", content_type="text/plain"),
        acp_models.MessagePart(content=PNG_B64, content_type="image/png", content_encoding="base64", name="dot.png"),
    ])

    async def main() -> Any:
        async with acp_client.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"},
                                     timeout=30) as client:
            return await client.run_sync(message, agent="chat")

    run = asyncio.run(main())
    assert run.status.value == "completed", run
    assert "".join(part.content or "" for out in run.output for part in out.parts) == "A single dark dot."
    content = model.requests[-1]["messages"][-1]["content"]
    assert content[0] == {"type": "text", "text": "What is in this picture?"}
    assert content[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}
    with sqlite3.connect(db) as connection:
        stored = connection.execute("SELECT attachments FROM robotlab_robotresult WHERE run_id = ?",
                                    (run.run_id.hex,)).fetchone()
    assert stored is not None and PNG_B64 in stored[0]


def test_a_video_part_is_invalid_input(site: tuple[str, str, Path, FakeLLMServer]) -> None:
    base_url, token, _db, _model = site
    message = acp_models.Message(parts=[acp_models.MessagePart(content="AAAA", content_type="video/mp4",
                                                               content_encoding="base64")])

    async def main() -> None:
        async with acp_client.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"},
                                     timeout=30) as client:
            await client.run_sync(message, agent="chat")

    with pytest.raises(acp_models.ACPError) as caught:
        asyncio.run(main())
    assert caught.value.error.code == "invalid_input" and "video/mp4" in caught.value.error.message


def test_the_docs_snippet_sends_a_file_and_an_image_url(site: tuple[str, str, Path, FakeLLMServer], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    base_url, token, _db, model = site
    page = (ROOT / "docs" / "django" / "acp.md").read_text()
    section = page[page.index("## Images and files"):]
    start = section.index("```python\n") + len("```python\n")
    snippet = section[start:section.index("\n```", start)]
    assert "run_sync(message" in snippet
    (tmp_path / "chart.png").write_bytes(base64.b64decode(PNG_B64))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROBOTLAB_TOKEN", token)
    monkeypatch.setenv("ACP_URL", base_url)
    exec(compile(snippet, "docs/django/acp.md", "exec"), {"__name__": "docs_acp"})
    assert capsys.readouterr().out.strip() == "A single dark dot."
    content = model.requests[-1]["messages"][-1]["content"]
    assert [part["type"] for part in content] == ["text", "image_url", "image_url"]
    assert content[1]["image_url"]["url"] == f"data:image/png;base64,{PNG_B64}"
    assert content[2]["image_url"]["url"] == "https://example.com/photos/cat.jpg"
