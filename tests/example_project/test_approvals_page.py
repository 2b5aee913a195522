"""Issue 27 (4, 7): the example's ``orders`` robot proposes a change, the chat page shows it as a card with the
before/after, Approve runs the write once, Deny leaves the row and the model reads the denial (Chromium, the offline
demo model, daphne). The writes are counted by a SQLite trigger on the orders table."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.example_project.test_example_project import _log_in, manage, served_project

pytestmark = pytest.mark.slow

COUNT_WRITES = """
CREATE TABLE order_writes (order_id INTEGER, status TEXT);
CREATE TRIGGER count_order_writes AFTER UPDATE ON orders_order
BEGIN INSERT INTO order_writes VALUES (NEW.id, NEW.status); END;
"""


@pytest.fixture
def orders_site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The example project with its demo users and orders, served: its URL and its database (writes counted)."""
    if not CHROMIUM.exists():
        pytest.skip("needs /usr/bin/chromium (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    db = tmp_path / "db.sqlite3"
    with sqlite3.connect(db) as connection:
        connection.executescript(COUNT_WRITES)
    with served_project(tmp_path) as url:
        yield url, db


def _query(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as connection:
        return list(connection.execute(sql, params).fetchall())


def _status(db: Path, number: str) -> str:
    return str(_query(db, "SELECT status FROM orders_order WHERE number = ?", number)[0][0])


def _card(page: Any, expect: Any) -> Any:
    card = page.locator(".rl-message.assistant .rl-approval").last
    expect(card).to_be_visible()
    return card


def test_approve_runs_the_write_once_and_deny_leaves_the_row(orders_site: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, db = orders_site
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            _log_in(page, url, "orders")
            expect(page.locator("#rl-connection")).to_have_text("live")
            page.fill("#rl-input", "Show my orders")
            page.click("#rl-send")
            reply = page.locator(".rl-message.assistant .rl-text").last
            expect(reply).to_contain_text('"number": "A-1002"')
            assert "B-2001" not in (reply.text_content() or "")  # bob's order is not demo's to see

            page.fill("#rl-input", "Change order 2 to shipped")
            page.click("#rl-send")
            card = _card(page, expect)
            expect(card.locator(".rl-approval-tool")).to_have_text("update_order")
            expect(card.locator(".rl-approval-arguments dt")).to_have_text(["id", "status"])
            expect(card.locator(".rl-approval-arguments dd")).to_have_text(["2", "shipped"])
            expect(card.locator(".rl-approval-change td")).to_have_text(["status", "placed", "shipped"])
            expect(page.locator(".rl-message.assistant .rl-status").last).to_have_text("waiting for your approval")
            assert _status(db, "A-1002") == "placed" and _query(db, "SELECT * FROM order_writes") == []
            page.reload()  # parked in the database: the card comes back
            card = _card(page, expect)
            expect(page.locator("#rl-connection")).to_have_text("live")
            card.locator(".rl-approve").click()  # over the websocket
            expect(page.locator(".rl-message.assistant .rl-text").last).to_contain_text(
                'update_order returned {"id": 2, "number": "A-1002", "item": "Gripper", "status": "shipped"}')
            expect(page.locator(".rl-approval")).to_have_count(0)
            assert _status(db, "A-1002") == "shipped"
            assert _query(db, "SELECT * FROM order_writes") == [(2, "shipped")]  # written once

            page.fill("#rl-input", "Change order 1 to cancelled")
            page.click("#rl-send")
            card = _card(page, expect)
            expect(card.locator(".rl-approval-change td")).to_have_text(["status", "placed", "cancelled"])
            card.locator(".rl-deny").click()
            expect(page.locator(".rl-message.assistant .rl-text").last).to_have_text(
                "I asked my tools: update_order returned denied by demo.")
            assert _status(db, "A-1001") == "placed" and len(_query(db, "SELECT * FROM order_writes")) == 1
        finally:
            browser.close()


def test_without_a_websocket_the_card_posts_the_decision(orders_site: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, db = orders_site
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20_000)
            page.add_init_script("window.WebSocket = undefined;")
            _log_in(page, url, "orders")
            expect(page.locator("#rl-connection")).to_have_text("polling")
            page.fill("#rl-input", "Change order 3 to placed")
            page.click("#rl-send")
            card = _card(page, expect)
            expect(card.locator(".rl-approval-change td")).to_have_text(["status", "shipped", "placed"])
            assert card.locator("input[name=csrfmiddlewaretoken]").get_attribute("value")
            card.locator(".rl-approve").click()
            expect(page.locator(".rl-message.assistant .rl-text").last).to_contain_text(
                '"number": "A-1003", "item": "Sensor kit", "status": "placed"}')
            assert _status(db, "A-1003") == "placed" and _query(db, "SELECT * FROM order_writes") == [(3, "placed")]
        finally:
            browser.close()
