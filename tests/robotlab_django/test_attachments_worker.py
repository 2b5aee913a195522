"""A run's attachments pass through the database to a real Celery worker process, which sends them to the model.

The worker (see :mod:`tests.robotlab_django.workers.test_warm_up`) talks to a
:class:`robotlab.testing.FakeLLMServer` in this process (``ROBOTLAB_TEST_LLM``), so the test reads the request
the worker sent.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from robotlab.testing.server import FakeLLMServer, reply
from tests.robotlab_django.workers.test_warm_up import ROOT, celery_worker, worker_env  # noqa: F401 (fixtures)

PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
CLIENT = """
import base64, json, django
django.setup()
import tests.robotlab_django.celery_app
from django.db import transaction
from robotlab import Attachment
from robotlab_django import services, tasks
from robotlab_django.runs import executor

with transaction.atomic():
    row = services.start_run("worker-pics", "echo", "What is this?",
                             attachments=[Attachment(data=base64.b64decode({png!r}), mime_type="image/png")])
    task_id = executor.enqueue(row, queue={queue!r})
outcome = tasks.run_robot.AsyncResult(task_id).get(timeout=60)
row.refresh_from_db()
print(json.dumps({{"status": row.status, "reply": row.reply}}))
"""


@pytest.fixture
def fake_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLLMServer]:
    """A fake model server the worker's robots call (set in the environment the worker fixtures copy)."""
    with FakeLLMServer(default=reply("A dot.")) as server:
        monkeypatch.setenv("ROBOTLAB_TEST_LLM", "tests.robotlab_django.server_llm.fake_server_llm")
        monkeypatch.setenv("ROBOTLAB_TEST_FAKE_API_BASE", server.base_url)
        monkeypatch.setenv("ROBOT_LAB_MODEL", "openai/gpt-4o-mini")
        yield server


@pytest.mark.slow
def test_a_celery_worker_sends_the_rows_attachments(fake_model: FakeLLMServer, celery_worker: str,  # noqa: F811
                                                    worker_env: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    client = subprocess.run([sys.executable, "-c", CLIENT.format(png=PNG_B64, queue=celery_worker)], cwd=ROOT,
                            env=worker_env, capture_output=True, text=True, timeout=180)
    worker_log = (tmp_path / "worker.log").read_text()
    assert client.returncode == 0, f"{client.stdout}\n{client.stderr}\n--- worker ---\n{worker_log}"
    outcome = json.loads(client.stdout.strip().splitlines()[-1])
    assert outcome == {"status": "completed", "reply": "A dot."}
    content = fake_model.requests[-1]["messages"][-1]["content"]
    assert content == [{"type": "text", "text": "What is this?"},
                       {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}}]
