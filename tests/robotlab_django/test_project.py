"""A fresh Django project: install, scaffold, migrate, run the generated tests, run a robot, see it in the admin.

Every step runs in a subprocess, as a user would run it, with no provider key in the environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.endswith("_API_KEY") and not key.startswith(("ROBOT_LAB_", "ROBOTLAB_", "DJANGO_", "PYTEST"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: list[str], cwd: Path, *, ok: bool = True) -> str:
    process = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    output = process.stdout + process.stderr
    if ok:
        assert process.returncode == 0, f"{' '.join(args)} failed:\n{output}"
    return output


def _manage(project: Path, *args: str) -> str:
    return _run([sys.executable, "manage.py", *args], project)


def _new_project(tmp_path: Path) -> Path:
    project = tmp_path / "site"
    project.mkdir()
    _run([sys.executable, "-m", "django", "startproject", "proj", "."], project)
    return project


def _add_settings(project: Path, text: str) -> None:
    with (project / "proj" / "settings.py").open("a") as handle:
        handle.write("\n" + textwrap.dedent(text))


FIRST_RUN = """
from robotlab.testing import FakeLLM, text
from robotlab_django import services
row = services.run_robot("s-1", "support", "Where is my order?",
                         llm=FakeLLM([text("It ships today.", usage=(120, 30), cost=0.0025)]))
print("RUN", row.status, row.sequence_number, row.input_tokens, row.output_tokens, row.cost)
"""

SECOND_RUN = """
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from robotlab.testing import FakeLLM, text
from robotlab_django import services
llm = FakeLLM([text("You asked about your order.", usage=(200, 10), cost=0.001)])
row = services.run_robot("s-1", "support", "What did I ask?", llm=llm)
print("HISTORY", [m["content"] for m in llm.requests[0].messages[1:]])
setup_test_environment()
admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
client = Client()
client.force_login(admin)
results = client.get("/admin/robotlab/robotresult/").content.decode()
threads = client.get("/admin/robotlab/thread/").content.decode()
print("ADMIN", "$0.003500" in threads, "Totals of these results: 2 runs, 320 input tokens, 40 output tokens" in results,
      "$0.002500" in results, "It ships today." in client.get(
          f"/admin/robotlab/thread/{row.thread_id}/transcript/").content.decode())
"""


def test_fresh_project_install_scaffold_migrate_test_and_admin(tmp_path: Path) -> None:
    project = _new_project(tmp_path)
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django"]\n')
    out = _manage(project, "robotlab_install")
    assert "RobotLab installed successfully!" in out and "INSTALLED_APPS += ['ai']" in out
    _add_settings(project, 'INSTALLED_APPS += ["ai"]\n')
    assert "robot 'support'" not in out
    assert "Robot 'support' (SupportRobot) written." in _manage(project, "startrobot", "Support")
    assert "Job 'support_job'" in _manage(project, "startrobotjob", "Support")
    check = _manage(project, "check")
    assert "robotlab.W002" in check and "robotlab.E" not in check  # no key: warned, not an error
    _manage(project, "migrate")
    assert "No changes detected" in _manage(project, "makemigrations", "--check", "--dry-run")
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "ai"], project)
    assert "8 passed" in tests, tests
    assert "warning" not in tests.lower(), tests  # issue 17: no pytest-asyncio deprecation warning
    django_tests = _manage(project, "test", "ai")  # issue 17 (3): Django's runner runs them too
    assert "Ran 8 tests" in django_tests and "OK" in django_tests, django_tests
    assert "RUN completed 1 120 30 0.00250000" in _manage(project, "shell", "-c", FIRST_RUN)
    second = _manage(project, "shell", "-c", SECOND_RUN)  # a new process resumes the conversation
    assert "HISTORY ['Where is my order?', 'It ships today.', 'What did I ask?']" in second
    assert "ADMIN True True True True" in second


def test_fresh_project_with_its_own_models(tmp_path: Path) -> None:
    project = _new_project(tmp_path)
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django"]\nROBOTLAB = {"LLM": "robotlab.testing.DemoLLM"}\n')
    out = _manage(project, "robotlab_install", "--app", "chat", "--models")
    assert '"THREAD_MODEL": "chat.Thread"' in out
    _add_settings(project, """
        INSTALLED_APPS += ["chat"]
        ROBOTLAB.update(THREAD_MODEL="chat.Thread", RESULT_MODEL="chat.RobotResult", EVENT_MODEL="chat.RunEvent",
                        STEP_MODEL="chat.RunStep")
    """)
    _manage(project, "startrobot", "Support", "--app", "chat")
    _manage(project, "startrobotjob", "Support", "--app", "chat")
    _manage(project, "makemigrations", "chat")
    _manage(project, "migrate")
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "chat"], project)
    assert "8 passed" in tests, tests
    script = """
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from chat.models import RobotResult
from robotlab_django import services
row = services.run_robot("s-1", "support", "Hello")
setup_test_environment()
client = Client()
client.force_login(get_user_model().objects.create_superuser("admin", "a@example.com", "pw"))
page = client.get("/admin/chat/robotresult/")
print("OWN", type(row).__module__, RobotResult.objects.count(), page.status_code, "offline demo model" in
      client.get(f"/admin/chat/thread/{row.thread_id}/transcript/").content.decode(), "STEPS", row.steps.exists(),
      "checkpointed LLM and tool calls" in client.get(f"/admin/chat/robotresult/{row.pk}/change/").content.decode())
"""
    assert "OWN chat.models 1 200 True STEPS True True" in _manage(project, "shell", "-c", script)


def test_a_startapp_app_runs_its_generated_tests_with_both_runners(tmp_path: Path) -> None:
    """Issue 17 (3): startapp's tests.py and the generated tests/ package cannot both exist."""
    project = _new_project(tmp_path)
    _manage(project, "startapp", "shop")
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django", "shop"]\n')
    assert "remove    shop/tests.py" in _manage(project, "robotlab_install", "--app", "shop")
    _manage(project, "startrobot", "Support", "--app", "shop")
    django_tests = _manage(project, "test", "shop")
    assert "Ran 5 tests" in django_tests and "OK" in django_tests, django_tests
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "shop"], project)
    assert "5 passed" in tests, tests
