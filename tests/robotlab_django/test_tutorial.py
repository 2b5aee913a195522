"""docs/django/tutorial.md, followed literally: its commands and files are read from the page and run.

A fresh ``django-admin startproject`` site gets the page's settings, URLs and ``asgi.py``, runs the page's
commands in order (``manage.py check`` must print no RobotLab warning), then daphne serves it: the login
page and the app's static files answer, and the admin shows the tutorial's superuser. The page's
``pip install`` line is checked against the extras instead of run (the suite's environment has them).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "django" / "tutorial.md"
_BLOCK = re.compile(r"```(console|python)\n(.*?)```", re.DOTALL)


def steps() -> list[tuple[str, str]]:
    """The page's steps in order: ``("command", line)`` or ``("file", python block)``."""
    found: list[tuple[str, str]] = []
    for kind, body in _BLOCK.findall(PAGE.read_text()):
        if kind == "console":
            found += [("command", line[2:]) for line in body.splitlines() if line.startswith("$ ")]
        else:
            found.append(("file", body))
    return found


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.endswith("_API_KEY") and not key.startswith(("ROBOT_LAB_", "ROBOTLAB_", "DJANGO_", "PYTEST"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _argv(line: str) -> tuple[list[str], dict[str, str]]:
    words = shlex.split(line)
    extra = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        extra[name] = value
    program = {"python": [sys.executable], "django-admin": [sys.executable, "-m", "django"],
               "pytest": [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
               "daphne": [sys.executable, "-m", "daphne"]}[words[0]]
    return [*program, *words[1:]], extra


def _write(site: Path, block: str) -> None:
    target = block.splitlines()[0].removeprefix("# ").strip()
    body = block.split("\n", 1)[1]
    path = site / target
    if target.endswith("settings.py"):  # the page says: append
        path.write_text(path.read_text() + "\n" + body)
    else:  # the page says: replace (urls.py) or make (asgi.py)
        path.write_text(body)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str, *, deadline: float) -> tuple[int, str]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, ""
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)  # daphne is still binding its port


def test_the_page_installs_the_test_extra() -> None:
    commands = [line for kind, line in steps() if kind == "command"]
    assert commands[0] == 'pip install "robotlab[django,test]"'
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "whitenoise" in " ".join(extras["django"]) and "pytest-django" in " ".join(extras["test"])


def test_following_the_tutorial_gives_a_working_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    server = None
    outputs: dict[str, str] = {}
    try:
        for kind, text in steps():
            if kind == "file":
                _write(site, text)
                continue
            if text.startswith("pip install"):
                continue
            argv, extra = _argv(text)
            if argv[:3] == [sys.executable, "-m", "daphne"]:
                port = str(_free_port())
                argv = [port if word == "8000" else word for word in argv]
                server = subprocess.Popen(argv, cwd=site, env={**_env(), **extra}, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True)
                continue
            done = subprocess.run(argv, cwd=site, env={**_env(), **extra}, capture_output=True, text=True,
                                  timeout=300)
            outputs[text] = done.stdout + done.stderr
            assert done.returncode == 0, f"$ {text}\n{outputs[text]}"
        assert "robotlab." not in outputs["python manage.py check"], outputs["python manage.py check"]
        assert "Ran 5 tests" in outputs["python manage.py test ai"], outputs["python manage.py test ai"]
        assert "5 passed" in outputs["pytest ai"], outputs["pytest ai"]
        assert server is not None, "the page starts no server"
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        status, login = _get(f"{base}/accounts/login/?next=/", deadline=deadline)
        assert status == 200 and 'id="rl-login"' in login
        assert _get(f"{base}/static/robotlab/robotlab.css", deadline=deadline)[0] == 200
        assert _get(f"{base}/static/robotlab/robotlab.js", deadline=deadline)[0] == 200
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
