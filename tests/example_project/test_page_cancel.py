"""Issue 26 (6): after a cancel, the chat page ends with exactly the text the run's row keeps (Chromium)."""

from __future__ import annotations

import time

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.example_project.test_example_project import RESULT_OF, _log_in, live_site

__all__ = ["live_site"]  # the fixture, used by name

pytestmark = pytest.mark.slow


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("robot", ["chat", "support"])
def test_after_a_cancel_the_page_shows_exactly_the_stored_reply(live_site: str, robot: str) -> None:
    """The cancel comes while the reply streams; the run streams a little more until it notices. The page must
    not freeze at the text it had when the button was clicked, nor show more than the row keeps."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, live_site, robot)
            expect(page.locator("#rl-connection")).to_have_text("live")
            results_url = page.locator("#robotlab-chat").get_attribute("data-results-url")
            # the demo model echoes the message a word every 20 ms: 400 words stream for about 8 s
            page.fill("#rl-input", "I need a refund for my invoice: " + " ".join(f"word{n}" for n in range(400)))
            page.click("#rl-send")
            text = page.locator(".rl-message.assistant .rl-text").last
            expect(text).to_contain_text("word5 ")
            page.locator(".rl-message.assistant .rl-cancel").last.click()
            expect(page.locator(".rl-message.assistant.cancelled")).to_have_count(1)
            shown = text.text_content() or ""
            deadline = time.monotonic() + 20
            while True:  # the row is cancelled at once; its reply is final once its runner stopped
                row = page.evaluate(RESULT_OF, results_url)
                if row["status"] == "cancelled" and _words(row["reply"]) == _words(shown):
                    break
                assert time.monotonic() < deadline, f"the page shows {len(shown)} characters, the row " \
                                                    f"{len(row['reply'])}: {shown[-40:]!r} / {row['reply'][-40:]!r}"
                page.wait_for_timeout(100)
            assert "word5 " in row["reply"] and "word399" not in row["reply"]
            page.reload()  # and a reload shows the same
            reloaded = page.locator(".rl-message.assistant .rl-text").last
            expect(reloaded).to_contain_text("word5 ")
            assert _words(reloaded.text_content() or "") == _words(shown)
        finally:
            browser.close()
