"""The example project: it checks, reads its settings from the environment, runs its robots offline, and
its chat page works in a real browser (Playwright + Debian chromium, skipped when either is missing)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "example_project"
MANAGE = PROJECT / "manage.py"
PAYLOAD = "<script>window.__pwned = 1</script><b>bold?</b>"
#: Variables that would take the project off its embedded default.
CLEARED = ("DATABASE_URL", "REDIS_URL", "REDIS_PREFIX", "ROBOTLAB_EXECUTOR", "DJANGO_SETTINGS_MODULE",
           "ROBOT_LAB_MODEL", "ROBOT_LAB_LLM__API_BASE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY",
           "GOOGLE_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "OPENROUTER_API_KEY", "XAI_API_KEY",
           "OLLAMA_API_BASE", "DJANGO_DEBUG", "ROBOTLAB_LOGIN_REQUIRED")


def project_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh clone: no keys, no services, a database in ``tmp_path``."""
    env = {key: value for key, value in os.environ.items() if key not in CLEARED and not key.endswith("_API_KEY")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env.update(extra)
    return env


def manage(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``example_project/manage.py ARGS`` from the repository root; fail with its output on an error."""
    done = subprocess.run([sys.executable, str(MANAGE), *args], cwd=ROOT, env=project_env(tmp_path, **extra),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


SETTINGS_PROBE = """
import json
from django.conf import settings
print(json.dumps({"db": settings.DATABASES["default"]["ENGINE"], "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
                  "db_options": settings.DATABASES["default"].get("OPTIONS", {}),
                  "conn_max_age": settings.DATABASES["default"].get("CONN_MAX_AGE"),
                  "health_checks": settings.DATABASES["default"].get("CONN_HEALTH_CHECKS"),
                  "hosts": settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("hosts"),
                  "layer_prefix": settings.CHANNEL_LAYERS["default"].get("CONFIG", {}).get("prefix"),
                  "transport": getattr(settings, "CELERY_BROKER_TRANSPORT_OPTIONS", {}),
                  "broker_transport": getattr(settings, "CELERY_BROKER_TRANSPORT", None),
                  "broker": settings.CELERY_BROKER_URL, "robotlab": settings.ROBOTLAB}))
"""


def test_manage_py_check_passes(tmp_path: Path) -> None:
    done = manage(tmp_path, "check", "--fail-level", "WARNING")
    assert "System check identified no issues" in done.stdout


def test_the_embedded_default(tmp_path: Path) -> None:
    env = project_env(tmp_path)
    del env["DATABASE_URL"]
    done = subprocess.run([sys.executable, str(MANAGE), "shell", "-c", SETTINGS_PROBE], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["db"] == "django.db.backends.sqlite3"
    assert found["layer"] == "channels.layers.InMemoryChannelLayer"
    assert found["robotlab"]["EXECUTOR"] == "thread"
    assert found["robotlab"]["LLM"] == "chat.robots.demo_llm"
    assert found["broker"] == "memory://" and found["broker_transport"] is None  # the URL's own transport
    journal = "from django.db import connection as c; print(c.cursor().execute('PRAGMA journal_mode').fetchone()[0])"
    done = manage(tmp_path, "shell", "-c", journal)  # any SQLite file, here one in tmp_path
    assert done.stdout.strip().splitlines()[-1] == "wal"


def test_settings_come_from_the_environment(tmp_path: Path) -> None:
    done = manage(tmp_path, "shell", "-c", SETTINGS_PROBE, DATABASE_URL="postgres://bot@db.example:5432/robots",
                  REDIS_URL="redis://cache.example:6379/1", ROBOT_LAB_MODEL="openai/gpt-4o-mini")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["db"] == "django.db.backends.postgresql"
    assert found["db_options"]["pool"] and found["conn_max_age"] == 0  # a pool, no persistent connections
    # that Django gives psycopg's check_connection (a "check" among the pool's options would be passed twice)
    assert found["health_checks"] is True and "check" not in found["db_options"]["pool"]
    assert found["layer"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    assert found["hosts"] == [{"address": "redis://cache.example:6379/1", "socket_timeout": None}]
    assert found["broker"] == "redis://cache.example:6379/1"
    assert found["broker_transport"] == "robotlab_django.workers.redis_broker:Transport"  # survives a broker restart
    assert found["robotlab"]["EXECUTOR"] == "celery"
    assert "LLM" not in found["robotlab"]  # a real model is configured: no demo model
    assert found["layer_prefix"] is None and found["transport"] == {}  # the libraries' own names


def test_redis_prefix_starts_every_key_and_channel_of_the_site(tmp_path: Path) -> None:
    """Two sites (or two test runs) on one Redis: a database number does not separate them, a prefix does."""
    done = manage(tmp_path, "shell", "-c", SETTINGS_PROBE, REDIS_URL="redis://cache.example:6379/1",
                  REDIS_PREFIX="site-a:")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["layer_prefix"] == "site-a:asgi" and found["transport"] == {"global_keyprefix": "site-a:"}


def test_the_chat_robot_runs_offline_with_its_tools(tmp_path: Path) -> None:
    manage(tmp_path, "migrate", "--noinput")
    code = ("from robotlab_django.services import run_robot\n"
            "row = run_robot(None, 'chat', 'What is 12 * 7?')\n"
            "print(row.status, '|', row.reply, '|', [m['role'] for m in row.messages])")
    done = manage(tmp_path, "shell", "-c", code, ROBOTLAB_EXECUTOR="sync")
    assert "completed | I asked my tools: calculate returned 84." in done.stdout
    assert "['user', 'assistant', 'tool', 'assistant']" in done.stdout


@pytest.mark.parametrize(("message", "route"), [("I was charged twice on my invoice", "billing"),
                                                 ("The app crashes when I log in", "technical"),
                                                 ("Hello there", "general")])
def test_the_support_network_routes_to_a_specialist(tmp_path: Path, message: str, route: str) -> None:
    done = manage(tmp_path, "support", message)
    assert done.stdout.splitlines()[0] == f"route: classifier -> {route}"
    assert "offline demo model" in done.stdout


NETWORK_TURNS = """
from robotlab_django.networks.turn import step_rows
from robotlab_django.services import run_robot
for message in ("I need a refund for my invoice", "The app crashes with an error", "Hello there"):
    row = run_robot(None, "support", message)
    print(row.status, "|", " -> ".join(step.robot_name for step in step_rows(row)), "|", row.reply)
"""


def test_the_support_network_runs_as_a_thread_turn_on_the_demo_model(tmp_path: Path) -> None:
    manage(tmp_path, "migrate", "--noinput")
    lines = [line for line in manage(tmp_path, "shell", "-c", NETWORK_TURNS, ROBOTLAB_EXECUTOR="sync").stdout
             .splitlines() if " | " in line]
    routes = [line.split(" | ")[:2] for line in lines]
    assert routes == [["completed", "classifier -> billing_agent"], ["completed", "classifier -> technical_agent"],
                      ["completed", "classifier -> general_agent"]]
    assert all("offline demo model" in line for line in lines)


def test_the_demo_user_is_created_and_only_with_debug(tmp_path: Path) -> None:
    manage(tmp_path, "migrate", "--noinput")
    assert "Created the demo user" in manage(tmp_path, "demo_user").stdout
    assert "Reset the demo user" in manage(tmp_path, "demo_user").stdout
    refused = subprocess.run([sys.executable, str(MANAGE), "demo_user"], cwd=ROOT, capture_output=True, text=True,
                             env=project_env(tmp_path, DJANGO_DEBUG="0", DJANGO_SECRET_KEY="x" * 50), timeout=120)
    assert refused.returncode != 0
    assert "local development only" in refused.stderr


ADMIN_PROBE = """
from django.contrib.auth import authenticate
admin = authenticate(username="admin", password="admin")
demo = authenticate(username="demo", password="demo")
print(admin.is_staff, admin.is_superuser, demo.is_staff)
"""


def test_the_admin_is_reachable_with_the_local_superuser(tmp_path: Path) -> None:
    """Issue 17 (1): scripts/run's demo_user also makes admin / admin, a superuser, and says so."""
    manage(tmp_path, "migrate", "--noinput")
    created = manage(tmp_path, "demo_user").stdout
    assert "log in as admin / admin for the admin at /admin/" in created
    assert manage(tmp_path, "shell", "-c", ADMIN_PROBE).stdout.splitlines()[-1].split() == ["True", "True", "False"]
    assert "/admin/ as admin / admin" in (ROOT / "scripts" / "run").read_text()


STATIC_PROBE = """
from django.test import Client
client = Client()
print(*(client.get(f"/static/robotlab/robotlab.{kind}").status_code for kind in ("css", "js")))
"""


def test_static_files_are_served_without_runserver(tmp_path: Path) -> None:
    """Issue 17 (6): under daphne (no runserver static handler) the chat's CSS and JS are not 404."""
    assert manage(tmp_path, "shell", "-c", STATIC_PROBE).stdout.splitlines()[-1] == "200 200"


def test_scripts_run_is_valid_bash() -> None:
    script = ROOT / "scripts" / "run"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "migrate" in text and "demo_user" in text and "runserver" in text


# -- the browser test ------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served_project(tmp_path: Path, *, port: int | None = None, **extra: str) -> Iterator[str]:
    """The migrated example project (database in ``tmp_path``) served by daphne's runserver on ``port`` (a free one
    by default), with the in-process executor and the demo model (``extra`` variables change them): its base URL."""
    port = port or _free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([sys.executable, str(MANAGE), "runserver", "--noreload", f"127.0.0.1:{port}"],
                              cwd=ROOT, env=project_env(tmp_path, **extra), stdout=log, stderr=subprocess.STDOUT)
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
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture
def live_site(tmp_path: Path) -> Iterator[str]:
    """The example project served by daphne's runserver on a free port (in-process executor, demo model)."""
    if not CHROMIUM.exists():
        pytest.skip("needs /usr/bin/chromium (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    with served_project(tmp_path) as url:
        yield url


RECORD_REPLIES = """() => {
  window.__replies = [];
  new MutationObserver(() => {
    const texts = document.querySelectorAll(".rl-message.assistant .rl-text");
    if (texts.length) { window.__replies.push(texts[texts.length - 1].textContent); }
  }).observe(document.getElementById("rl-messages"), {subtree: true, childList: true, characterData: true});
}"""


def test_the_chat_page_in_a_browser(live_site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(live_site + "/")
            page.fill("#id_username", "demo")
            page.fill("#id_password", "demo")
            page.click("#rl-login")
            expect(page.locator("#robotlab-demo-notice")).to_be_visible()
            page.click("#rl-new-thread")
            page.wait_for_selector("#robotlab-chat")
            expect(page.locator("#rl-connection")).to_have_text("live")  # the websocket is open
            # the demo model streams a word every 20 ms: tokens show before the run completes
            page.evaluate(RECORD_REPLIES)
            page.fill("#rl-input", "Tell me something nice")
            page.click("#rl-send")
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_contain_text("talk to a real model.")
            expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty()
            final = reply.text_content()
            snapshots: list[Any] = page.evaluate("window.__replies")
            partial = [text for text in snapshots if text and text != final and final.startswith(text)]
            assert partial, f"the reply arrived in one piece ({page.text_content('#rl-connection')!r}): {snapshots}"
            # a tool call shows a badge, and the tool's answer
            page.fill("#rl-input", "What is 12 * 7?")
            page.press("#rl-input", "Enter")
            expect(page.locator(".rl-message.assistant .rl-tool-badge").last).to_have_text("calculate")
            expect(page.locator(".rl-message.assistant .rl-text").last).to_contain_text("calculate returned 84")
            # markup in a message and in the model's reply is text, never HTML
            page.fill("#rl-input", PAYLOAD)
            page.click("#rl-send")
            expect(page.locator(".rl-message.assistant .rl-text").last).to_contain_text("<b>bold?</b>")
            assert page.evaluate("window.__pwned") is None
            assert page.locator(".rl-message b").count() == 0
            # history on reload
            page.reload()
            texts = page.locator(".rl-message .rl-text").all_text_contents()
            assert texts[0] == "Tell me something nice"
            assert any("calculate returned 84" in text for text in texts)
            assert texts[-2] == PAYLOAD
            assert PAYLOAD in texts[-1]
            assert page.evaluate("window.__pwned") is None
            assert page.locator(".rl-message b").count() == 0
            expect(page.locator(".rl-message.assistant .rl-tool-badge")).to_have_text(["calculate"])
        finally:
            browser.close()


def test_the_chat_page_without_a_websocket_polls(live_site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.add_init_script("window.WebSocket = undefined;")
            page.goto(live_site + "/")
            page.fill("#id_username", "demo")
            page.fill("#id_password", "demo")
            page.click("#rl-login")
            page.click("#rl-new-thread")
            expect(page.locator("#rl-connection")).to_have_text("polling")
            page.fill("#rl-input", "What is 6 * 7?")
            page.click("#rl-send")
            expect(page.locator(".rl-message.assistant .rl-text").last).to_have_text(
                "I asked my tools: calculate returned 42.")
            expect(page.locator(".rl-message.assistant .rl-tool-badge")).to_have_text(["calculate"])
            expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty()
        finally:
            browser.close()


def test_the_support_network_in_a_browser(live_site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.goto(live_site + "/")
            page.fill("#id_username", "demo")
            page.fill("#id_password", "demo")
            page.click("#rl-login")
            page.select_option("#rl-robot", "support")
            page.click("#rl-new-thread")
            expect(page.locator("#rl-kind")).to_have_text("network")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.evaluate(RECORD_REPLIES)
            page.fill("#rl-input", "I need a refund for my invoice")
            page.click("#rl-send")
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_contain_text("talk to a real model.")
            expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty()
            expect(page.locator(".rl-message.assistant .rl-step-badge")).to_have_text(["classifier", "billing_agent"])
            final = reply.text_content()
            snapshots: list[Any] = page.evaluate("window.__replies")
            assert [text for text in snapshots if text and text != final and final.startswith(text)], snapshots
            page.reload()
            expect(page.locator(".rl-message .rl-text")).to_have_text(["I need a refund for my invoice", final])
            expect(page.locator(".rl-message.assistant .rl-step-badge.done")).to_have_text(
                ["classifier", "billing_agent"])
        finally:
            browser.close()


def _log_in(page: Any, live_site: str, robot: str) -> None:
    page.goto(live_site + "/")
    page.fill("#id_username", "demo")
    page.fill("#id_password", "demo")
    page.click("#rl-login")
    page.select_option("#rl-robot", robot)
    page.click("#rl-new-thread")
    page.wait_for_selector("#robotlab-chat")


def test_a_question_is_answered_on_the_chat_page_and_the_resumed_reply_streams_in(live_site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, live_site, "concierge")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.fill("#rl-input", "Ask the user which plan suits them")
            page.click("#rl-send")
            question = page.locator(".rl-message.assistant .rl-question")
            expect(question.locator(".rl-question-text")).to_have_text("Ask the user which plan suits them")
            expect(page.locator(".rl-message.assistant .rl-status").last).to_have_text("waiting for your answer")
            # the run is parked: no worker holds it, and a reload shows the question again
            page.reload()
            expect(question.locator(".rl-question-text")).to_have_text("Ask the user which plan suits them")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.evaluate(RECORD_REPLIES)
            question.locator(".rl-answer").fill("the <b>pro</b> plan")
            question.locator(".rl-answer-send").click()
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_have_text("I asked my tools: robot_lab--ask_user returned the <b>pro</b> plan.")
            expect(question).to_have_count(0)
            expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty()
            assert page.locator(".rl-message b").count() == 0  # the answer is text, never HTML
            final = reply.text_content()
            snapshots: list[Any] = page.evaluate("window.__replies")
            assert [text for text in snapshots if text and text != final and final.startswith(text)], snapshots
        finally:
            browser.close()


def test_a_question_with_choices_is_answered_with_a_click(live_site: str) -> None:
    """Issue 13: a question with choices shows a button per choice; a click answers and the reply resumes."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, live_site, "concierge")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.fill("#rl-input", "Ask the user which plan suits them: basic, pro or team")
            page.click("#rl-send")
            question = page.locator(".rl-message.assistant .rl-question")
            expect(question.locator(".rl-choice")).to_have_text(["basic", "pro", "team"])
            expect(question.locator(".rl-answer")).to_have_count(0)  # buttons, no text box
            question.locator(".rl-choice", has_text="pro").click()
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_have_text("I asked my tools: robot_lab--ask_user returned pro.")
            expect(question).to_have_count(0)
            expect(page.locator(".rl-message.assistant .rl-status").last).to_be_empty()
        finally:
            browser.close()


RESULT_OF = """async (url) => {
  const response = await fetch(url, {headers: {Accept: "application/json"}, credentials: "same-origin"});
  const data = await response.json();
  return data.results[data.results.length - 1];
}"""


def test_cancel_stops_a_streaming_reply_within_a_second_with_its_partial_text(live_site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, live_site, "chat")
            expect(page.locator("#rl-connection")).to_have_text("live")
            results_url = page.locator("#robotlab-chat").get_attribute("data-results-url")
            # the demo model echoes the message a word every 20 ms: 400 words stream for about 8 s
            page.fill("#rl-input", " ".join(f"word{index}" for index in range(400)))
            page.click("#rl-send")
            expect(page.locator(".rl-message.assistant .rl-text").last).to_contain_text("word5 ")
            clicked = time.monotonic()
            with page.expect_response(lambda response: response.url.endswith("/cancel/")) as cancelled:
                page.locator(".rl-message.assistant .rl-cancel").last.click()
            assert cancelled.value.status == 202, cancelled.value.text()
            while True:
                row = page.evaluate(RESULT_OF, results_url)
                if row["status"] == "cancelled" and row["reply"]:
                    break
                assert time.monotonic() - clicked < 1.0, f"not cancelled within 1 s: {row}"
                page.wait_for_timeout(50)
            stopped = time.monotonic() - clicked
            assert stopped < 1.0
            print(f"cancelled with its partial reply {stopped:.3f} s after the click")
            assert "word5 " in row["reply"] and "word399" not in row["reply"]
            expect(page.locator(".rl-message.assistant.cancelled")).to_have_count(1)
            expect(page.locator(".rl-message.assistant .rl-cancel")).to_have_count(0)
            shown = page.locator(".rl-message.assistant .rl-text").last.text_content() or ""
            assert shown.startswith("This is the offline demo model") and "word399" not in shown
        finally:
            browser.close()


def test_the_terminal_counts_tool_calls_in_english() -> None:
    """Issue 17: "1 tool call", not "1 tool calls"."""
    spec = importlib.util.spec_from_file_location("terminal_chat", ROOT / "example_project" / "terminal_chat.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.summary(12, 4, 1) == "[12 in / 4 out tokens, 1 tool call]"
    assert module.summary(12, 4, 0) == "[12 in / 4 out tokens, 0 tool calls]"
    assert module.summary(12, 4, 2).endswith("2 tool calls]")


def test_the_tour_pages_fit_at_1400_and_390_px(live_site: str) -> None:
    """Issue 17: the chat page, the admin's runs, one run and the usage page overflow at neither width.

    ``scripts/screenshots.py`` makes the docs' tour pictures after the same check; here it only checks.
    """
    spec = importlib.util.spec_from_file_location("screenshots", ROOT / "scripts" / "screenshots.py")
    assert spec is not None and spec.loader is not None
    screenshots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screenshots)
    assert screenshots.capture(live_site, None) == []


#: Model output that must come out inert: a script, an image's onerror, javascript: links (Markdown and HTML).
HOSTILE = ('<img src=x onerror="window.__pwned = 2"> [click](javascript:window.__pwned=3) '
           '<a href="javascript:window.__pwned=4">raw</a> <script>window.__pwned = 1</script>')


def test_replies_render_as_markdown_and_model_html_stays_inert(live_site: str) -> None:
    """Issue 13 (5): lists, tables, highlighted code and safe links, live and after a reload; no HTML of the
    model's runs, whether it comes as HTML or as a Markdown link."""
    from playwright.sync_api import expect, sync_playwright

    def check_sample(reply: Any) -> None:
        expect(reply.locator("strong")).to_have_text("Markdown")
        expect(reply.locator("ul > li")).to_have_count(2)
        expect(reply.locator("table tr")).to_have_count(3)
        expect(reply.locator("pre code")).to_contain_text('return f"Hello, {name}!"')
        assert reply.locator("pre code span[class^='hljs']").count() > 0  # highlighted
        link = reply.locator("a")
        expect(link).to_have_attribute("href", "https://github.com/MadBomber/robot_lab")
        expect(link).to_have_attribute("target", "_blank")
        assert set((link.get_attribute("rel") or "").split()) >= {"noopener", "noreferrer"}

    def check_inert(page: Any, reply: Any) -> None:
        expect(reply).to_contain_text('<img src=x onerror="window.__pwned = 2">')  # shown as text
        assert reply.locator("img, script, iframe").count() == 0
        assert page.locator(".rl-text a[href^='javascript' i]").count() == 0
        assert page.evaluate("window.__pwned") is None

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, live_site, "chat")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.fill("#rl-input", "Show me some Markdown")
            page.click("#rl-send")
            sample = page.locator(".rl-message.assistant .rl-text").nth(0)
            expect(sample).to_contain_text("Read more in the RobotLab docs.")
            check_sample(sample)
            page.fill("#rl-input", HOSTILE)
            page.click("#rl-send")
            hostile = page.locator(".rl-message.assistant .rl-text").nth(1)
            expect(hostile).to_contain_text("to talk to a real model.")
            check_inert(page, hostile)
            page.reload()  # the replies the server rendered render the same way
            check_sample(page.locator(".rl-message.assistant .rl-text").nth(0))
            check_inert(page, page.locator(".rl-message.assistant .rl-text").nth(1))
        finally:
            browser.close()
