"""A network turn's trace in Chromium: the waterfall drawn, hostile names inert, a bar leading to its transcript line.

With ``ROBOTLAB_WRITE_SCREENSHOTS=1`` it also writes the docs' picture, ``docs/django/img/trace-waterfall.png``
(the trace of a 1 -> 8 -> 1 turn on a run's admin page at 1,400 px).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.browser import launch
from tests.robotlab_django.admin.trace_turn import make_turn

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]
PICTURE = ROOT / "docs" / "django" / "img" / "trace-waterfall.png"
SCRIPT = "<script>window.__pwned = 1; alert(1)</script>"
IMAGE = "<img src=x onerror=\"window.__pwned = 2\">"

#: The elements reaching past the viewport's right edge, outside a box that scrolls on its own ([] when none).
WIDE = """() => {
  const width = window.innerWidth;
  const scrolls = (el) => ["auto", "scroll", "hidden"].includes(getComputedStyle(el).overflowX);
  const contained = (el) => {
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      if (scrolls(up) && up.getBoundingClientRect().right <= width + 1) { return true; }
    }
    return false;
  };
  return [...document.querySelectorAll("#robotlab-trace, #robotlab-trace *")]
    .filter((el) => el.getBoundingClientRect().right > width + 1 && !contained(el))
    .map((el) => `${el.tagName}.${el.getAttribute("class") || ""} ${Math.round(el.getBoundingClientRect().right)}`);
}"""


def _log_in(page: Any, base: str) -> None:
    page.goto(base + reverse("admin:login"))
    page.fill("#id_username", "boss")
    page.fill("#id_password", "secret")
    page.click("input[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def test_the_waterfall_in_chromium(live_server: Any, settings: Any, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    import django.contrib.admin

    settings.STATIC_ROOT = str(Path(django.contrib.admin.__file__).parent / "static")  # the admin's CSS, served
    get_user_model().objects.create_superuser("boss", "boss@example.com", "secret")
    turn = make_turn(8, session="turn-8")
    hostile = make_turn(2, robot=SCRIPT, tool=IMAGE, session="hostile")
    base = live_server.url
    dialogs: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(20_000)
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            _log_in(page, base)

            page.goto(base + reverse("admin:robotlab_robotresult_change", args=[turn.row.pk]))
            chart = page.locator("#robotlab-trace svg.robotlab-waterfall")
            sync_api.expect(chart).to_be_visible()
            sync_api.expect(chart.locator("g.span")).to_have_count(47)
            sync_api.expect(chart.locator("g.span.slowest text").first).to_have_text("execute_tool search")
            sync_api.expect(chart.locator("g.span.costliest")).to_have_count(1)
            box = chart.bounding_box()
            assert box is not None and box["width"] >= 720  # the width the page leaves it, never less
            assert page.evaluate(WIDE) == []
            shot = page.locator("#robotlab-trace").screenshot()
            (tmp_path / "trace.png").write_bytes(shot)
            if os.environ.get("ROBOTLAB_WRITE_SCREENSHOTS"):
                PICTURE.parent.mkdir(parents=True, exist_ok=True)
                PICTURE.write_bytes(shot)

            # a tool call's bar leads to its line of the task's transcript
            tool = turn.spans[("branch_2", "tool")]
            chart.locator(f'g.span[data-span-id="{tool.span_id}"] rect').click()
            task = turn.tasks["branch_2"]
            page.wait_for_url(f"**/robotresult/{task.pk}/change/#robotlab-step-{task.pk}-2")
            line = page.locator(f"#robotlab-step-{task.pk}-2")
            sync_api.expect(line).to_contain_text("Tool call")
            sync_api.expect(line).to_contain_text("search")
            assert page.evaluate("document.querySelector(':target').id") == f"robotlab-step-{task.pk}-2"

            page.goto(base + reverse("admin:robotlab_robotresult_change", args=[turn.row.pk]))
            page.set_viewport_size({"width": 390, "height": 900})  # a phone: the chart scrolls in its own box
            assert page.evaluate(WIDE) == [], page.evaluate(WIDE)

            page.set_viewport_size({"width": 1400, "height": 900})
            page.goto(base + reverse("admin:robotlab_robotresult_change", args=[hostile.row.pk]))
            names = page.locator("#robotlab-trace svg.robotlab-waterfall text")
            sync_api.expect(names.filter(has_text="invoke_agent <script>")).to_have_count(2)
            sync_api.expect(names.filter(has_text="execute_tool <img src=x")).to_have_count(2)
            assert page.locator("#robotlab-trace script, #robotlab-trace img").count() == 0
            assert page.evaluate("window.__pwned") is None and dialogs == []
        finally:
            browser.close()
