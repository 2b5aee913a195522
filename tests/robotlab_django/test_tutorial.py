"""docs/django/tutorial.md and its sequel tutorial-models.md, followed literally: their commands and files are read
from the pages and run.

A fresh ``django-admin startproject`` site gets the page's settings, URLs and ``asgi.py``, runs the page's
commands in order (``manage.py check`` must print no RobotLab warning, both test runners run the generated
tests), then daphne serves it and Chromium does what the page's last step says: log in as the tutorial's
superuser, start a conversation, watch the reply stream in over the websocket, and open the admin, where
the run shows. The page's ``pip install`` line is checked against the extras instead of run (the suite's
environment has them). Then the same site follows "Robots on your models": a model, a robot with model tools,
migrations and two notes, daphne again, and in Chromium what its last step says: the notes are shown, a change
waits as a card with its before/after, Approve writes it, Deny leaves the note and the model reads the denial.
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

from tests.browser import launch

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "django" / "tutorial.md"
MODELS_PAGE = ROOT / "docs" / "django" / "tutorial-models.md"
DISTRIBUTION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
_BLOCK = re.compile(r"```(console|python)\n(.*?)```", re.DOTALL)


def steps(page: Path = PAGE) -> list[tuple[str, str]]:
    """The page's steps in order: ``("command", line)`` or ``("file", python block)``."""
    found: list[tuple[str, str]] = []
    for kind, body in _BLOCK.findall(page.read_text()):
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
    assert commands[0] == f'pip install "{DISTRIBUTION}[django,test]"'
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "whitenoise" in " ".join(extras["django"]) and "pytest-django" in " ".join(extras["test"])


def _follow(page: Path, site: Path, outputs: dict[str, str]) -> tuple[subprocess.Popen[str] | None, str]:
    """Write the page's files and run its commands in ``site``; the daphne it starts and its port."""
    server, port = None, ""
    for kind, text in steps(page):
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
        done = subprocess.run(argv, cwd=site, env={**_env(), **extra}, capture_output=True, text=True, timeout=300)
        outputs[text] = done.stdout + done.stderr
        assert done.returncode == 0, f"$ {text}\n{outputs[text]}"
    return server, port


def _stop(server: subprocess.Popen[str] | None) -> None:
    if server is not None:
        server.terminate()
        server.wait(timeout=10)


def _serving(port: str) -> str:
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    status, login = _get(f"{base}/accounts/login/?next=/", deadline=deadline)
    assert status == 200 and 'id="rl-login"' in login
    return base


def test_following_the_tutorial_gives_a_working_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    server = None
    outputs: dict[str, str] = {}
    try:
        server, port = _follow(PAGE, site, outputs)
        assert "robotlab." not in outputs["python manage.py check"], outputs["python manage.py check"]
        assert "Ran 5 tests" in outputs["python manage.py test ai"], outputs["python manage.py test ai"]
        assert "5 passed" in outputs["pytest ai"], outputs["pytest ai"]
        assert server is not None, "the page starts no server"
        base = _serving(port)
        deadline = time.monotonic() + 30
        assert _get(f"{base}/static/robotlab/robotlab.css", deadline=deadline)[0] == 200
        assert _get(f"{base}/static/robotlab/robotlab.js", deadline=deadline)[0] == 200
        _chat_and_admin(base)
        _stop(server)  # the next page restarts it
        server = None
        server, port = _follow(MODELS_PAGE, site, outputs)
        assert server is not None, "the models page starts no server"
        _notes_with_approval(_serving(port), site / "db.sqlite3")
    finally:
        _stop(server)


#: Records the last reply's text at every change, to tell a streamed reply from one that arrived whole.
RECORD_REPLIES = """() => {
  window.__replies = [];
  new MutationObserver(() => {
    const texts = document.querySelectorAll(".rl-message.assistant .rl-text");
    if (texts.length) { window.__replies.push(texts[texts.length - 1].textContent); }
  }).observe(document.getElementById("rl-messages"), {subtree: true, childList: true, characterData: true});
}"""


def _chat_and_admin(base: str) -> None:
    """The page's step 6 in Chromium: log in as admin/admin, chat and see tokens stream, open the admin, log out."""
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    with sync_api.sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(base + "/")
            assert "/accounts/login/" in page.url  # the chat pages ask for a login, and the login page exists
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin")
            page.click("#rl-login")
            page.click("#rl-new-thread")
            page.wait_for_selector("#robotlab-chat")
            expect(page.locator("#rl-connection")).to_have_text("live")  # the websocket is open
            page.evaluate(RECORD_REPLIES)
            message = " ".join(f"word{index}" for index in range(40))
            page.fill("#rl-input", message)
            page.click("#rl-send")
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_contain_text("word39")
            expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty()
            final = reply.text_content() or ""
            snapshots: list[str] = page.evaluate("window.__replies")
            partial = [text for text in snapshots if text and text != final and final.startswith(text)]
            assert len(partial) >= 3, f"the reply did not stream ({page.text_content('#rl-connection')!r}): {snapshots}"
            # the header links the admin for staff; the run is there with its robot
            page.click(".rl-admin-link")
            expect(page.locator("#site-name")).to_be_visible()
            page.get_by_role("link", name="Robot results").first.click()
            rows = page.locator("#result_list tbody tr")
            expect(rows).to_have_count(1)
            assert "chat" in (rows.first.text_content() or "").lower()
            rows.first.locator("th a, td a").first.click()
            expect(page.locator("body")).to_contain_text("word39")
            # the chat's "Log out" lands on the login page, not on the admin's "Logged out" page
            page.goto(base + "/")
            page.click("#rl-logout")
            expect(page.locator("#rl-login")).to_be_visible()
            assert "/accounts/login/" in page.url and "Log in again" not in page.content()
        finally:
            browser.close()


def _note_status(db: Path) -> dict[int, str]:
    import sqlite3

    with sqlite3.connect(db) as connection:
        return dict(connection.execute("SELECT id, status FROM ai_note ORDER BY id").fetchall())


def _notes_with_approval(base: str, db: Path) -> None:
    """"Robots on your models", step 4 in Chromium: show the notes, approve one change, deny another."""
    sync_api = pytest.importorskip("playwright.sync_api")
    expect = sync_api.expect
    with sync_api.sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(base + "/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin")
            page.click("#rl-login")
            page.select_option("#rl-robot", "notes")
            page.click("#rl-new-thread")
            expect(page.locator("#rl-connection")).to_have_text("live")
            reply = page.locator(".rl-message.assistant .rl-text")
            page.fill("#rl-input", "Show my notes")
            page.click("#rl-send")
            expect(reply.last).to_contain_text('"title": "Buy milk"')
            expect(reply.last).to_contain_text('"title": "Call mum"')

            page.fill("#rl-input", "Change note 1 to done")
            page.click("#rl-send")
            card = page.locator(".rl-approval")
            expect(card.locator(".rl-approval-tool")).to_have_text("update_note")
            expect(card.locator(".rl-approval-change td")).to_have_text(["status", "open", "done"])
            assert _note_status(db) == {1: "open", 2: "open"}
            card.locator(".rl-approve").click()
            expect(reply.last).to_contain_text('"title": "Buy milk", "status": "done"')
            assert _note_status(db) == {1: "done", 2: "open"}

            page.fill("#rl-input", "Change note 2 to done")
            page.click("#rl-send")
            expect(card.locator(".rl-approval-change td")).to_have_text(["status", "open", "done"])
            card.locator(".rl-deny").click()
            expect(reply.last).to_have_text("I asked my tools: update_note returned denied by admin.")
            assert _note_status(db) == {1: "done", 2: "open"}
        finally:
            browser.close()
