"""The chat page in Chromium when a second message comes while a reply runs (issue 29, 5), under the chat robot's
on-busy policy (``ROBOTLAB_ON_BUSY``). The demo model streams slowly here (``ROBOTLAB_DEMO_DELAY``: 0.25 s a word,
some 10 s a reply), so the second message is sent while the first reply is still typing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.browser import launch
from tests.example_project.test_example_project import _log_in, manage, served_project

#: Seconds a word of the demo model's replies: a reply types for about ten seconds.
DELAY = "0.25"


@contextmanager
def _chat(tmp_path: Path, policy: str) -> Iterator[Any]:
    """A logged-in chat page of the example project whose chat robot has ``policy``; its first reply typing (four
    words in, some thirty to come)."""
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import expect, sync_playwright

    env = {"ROBOTLAB_ON_BUSY": policy, "ROBOTLAB_DEMO_DELAY": DELAY}
    manage(tmp_path, "migrate", "--noinput", **env)
    manage(tmp_path, "demo_user", **env)
    with served_project(tmp_path, **env) as url, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            _log_in(page, url, "chat")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.fill("#rl-input", "first message")
            page.press("#rl-input", "Enter")
            expect(page.locator(".rl-message.assistant .rl-text").first).to_contain_text("This is the offline")
            yield page
        finally:
            browser.close()


def _send(page: Any, text: str) -> None:
    page.fill("#rl-input", text)
    page.press("#rl-input", "Enter")


def test_enqueue_shows_the_message_queued_behind_the_current_reply(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with _chat(tmp_path, "enqueue") as page:
        _send(page, "second message")
        replies = page.locator(".rl-message.assistant")
        expect(replies.nth(1).locator(".rl-status")).to_have_text("queued behind the current reply")
        expect(replies.nth(0).locator(".rl-status")).to_have_text("typing…")  # the first reply still runs
        expect(replies.nth(1).locator(".rl-text")).to_contain_text("You said: 'second message'", timeout=60_000)
        expect(replies.nth(0).locator(".rl-text")).to_contain_text("You said: 'first message'")
        expect(page.locator(".rl-message.assistant .rl-status")).to_have_text(["", ""])


def test_reject_shows_the_error_and_gives_the_text_back(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with _chat(tmp_path, "reject") as page:
        _send(page, "second message")
        error = page.locator(".rl-message.assistant.failed .rl-error")
        expect(error).to_contain_text("A reply is still running on this thread")
        expect(page.locator("#rl-input")).to_have_value("second message")
        expect(page.locator(".rl-message.user .rl-text")).to_have_text(["first message"])  # nothing was queued


def test_interrupt_stops_the_reply_keeping_its_text_and_answers_the_new_message(tmp_path: Path) -> None:
    from playwright.sync_api import expect

    with _chat(tmp_path, "interrupt") as page:
        _send(page, "second message")
        replies = page.locator(".rl-message.assistant")
        expect(replies.nth(0).locator(".rl-status")).to_have_text("cancelled")
        expect(replies.nth(0).locator(".rl-text")).to_contain_text("This is the offline")  # kept
        expect(replies.nth(1).locator(".rl-text")).to_contain_text("You said: 'second message'", timeout=60_000)
        kept = replies.nth(0).locator(".rl-text").inner_text()
        assert "Set ROBOT_LAB_MODEL" not in kept  # it stopped before the end
        page.reload()  # as stored: the partial reply, cancelled, then the new one
        expect(page.locator(".rl-message.user .rl-text")).to_have_text(["first message", "second message"])
        expect(page.locator(".rl-message.assistant .rl-status").first).to_have_text("cancelled")


def test_steer_adds_the_message_to_the_running_reply(tmp_path: Path) -> None:
    """The first reply waits on a tool call (the demo model takes eight words' time before one, here 2 s), so the
    second message is sent before its next model call, which reads it."""
    pytest.importorskip("playwright.sync_api")
    from playwright.sync_api import expect, sync_playwright

    env = {"ROBOTLAB_ON_BUSY": "steer", "ROBOTLAB_DEMO_DELAY": DELAY}
    manage(tmp_path, "migrate", "--noinput", **env)
    manage(tmp_path, "demo_user", **env)
    with served_project(tmp_path, **env) as url, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(30_000)
            _log_in(page, url, "chat")
            expect(page.locator("#rl-connection")).to_have_text("live")
            _send(page, "What is 2+3?")
            replies = page.locator(".rl-message.assistant")
            expect(replies.nth(0).locator(".rl-status")).to_have_text("thinking…")
            _send(page, "second message")
            expect(replies.nth(1).locator(".rl-status")).to_have_text("added to the reply above")
            first = replies.nth(0).locator(".rl-text")
            expect(first).to_contain_text("You said: 'second message'", timeout=60_000)  # the same reply read it
            expect(replies.nth(0).locator(".rl-status")).to_have_text("")
            page.reload()  # as stored: both messages, one reply
            expect(page.locator(".rl-message.user .rl-text")).to_have_text(["What is 2+3?", "second message"])
            expect(page.locator(".rl-message.assistant .rl-status")).to_have_text(["added to the reply above"])
            expect(page.locator(".rl-message.assistant .rl-text").first).to_contain_text("second message")
        finally:
            browser.close()
