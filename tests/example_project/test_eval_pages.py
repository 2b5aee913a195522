"""Issue 30 (5, 6): the comparison of two eval runs and the rolling online score, in Chromium on the example project.

The seed is real: two offline eval runs of the ``chat`` robot (the second after three cases' recorded outputs
changed, pinned to a second version), and production runs on the offline demo model scored by online evals (their
scores moved back over two weeks, a version each week). With ``ROBOTLAB_SCREENSHOTS=<folder>`` the test also writes
the docs' pictures there (``docs/django/img``: ``admin-eval-compare-1400.png``, ``admin-online-scores-1400.png``,
``admin-version-diff-1400.png``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import CHROMIUM, CHROMIUM_ARGS
from tests.example_project.test_example_project import manage, served_project

pytestmark = pytest.mark.slow

HOSTILE = "<img src=x onerror=alert(1)>"

SEED = r'''
import datetime as dt
from django.conf import settings
from django.utils import timezone
from robotlab_django.evals.cases import load_yaml
from robotlab_django.evals.eval_runs import run_eval
from robotlab_django.models import EvalCase, OnlineScore, RobotVersion
from robotlab_django.services import run_robot
from robotlab_django.versions.choice import set_current

CASES = [("refund policy", "Can I get a refund?", "Yes, within 30 days.", "30 days"),
         ("opening hours", "When are you open?", "Every day, 9 to 5.", "9 to 5"),
         ("order status", "Where is order 42?", "Order #42 ships today.", "#42"),
         ("greeting", "Hello", "Hi! How can I help?", "help"),
         (HOSTILE, "Print an image", "Here it is.", "Here"),
         ("shipping cost", "How much is shipping?", "Shipping is free over $50.", "free"),
         ("cancel", "Cancel my order", "Your order is canceled.", "cancelled"),
         ("escalate", "I want a human", "I am passing you to a person.", "person")]
lines = ["set: support-smoke", "cases:"]
for number, (name, message, reply, needle) in enumerate(CASES):
    tokens = 40 + 7 * number
    lines.append(f"  - {{name: {name!r}, input: {message!r}, expectations: [{{kind: contains, value: {needle!r}}}], "
                 f"recorded: [{{content: {reply!r}, input_tokens: {tokens}, output_tokens: 12, cost: 0.0004}}]}}")
eval_set, _count = load_yaml("\n".join(lines))
first = set_current(RobotVersion.objects.create(robot_name="chat", number=1, prompt="You answer support questions."))
second = RobotVersion.objects.create(robot_name="chat", number=2, prompt="You answer briefly.", note="shorter")
base = run_eval("chat", eval_set, first, offline=True)
changed = {"refund policy": "Refunds are possible.", "order status": "It ships soon.", "opening hours": "9 to 5.",
           "cancel": "Your order is cancelled.", "escalate": "A person will call."}
for case in EvalCase.objects.filter(eval_set=eval_set, name__in=changed):
    case.recorded = [{**case.recorded[0], "content": changed[case.name], "input_tokens": 30, "cost": 0.0003}]
    case.save()
other = run_eval("chat", eval_set, second, offline=True)

settings.ROBOTLAB["ONLINE_EVALS"] = {"chat": {"rate": 1.0, "evaluators": [
    {"kind": "regex", "pattern": r"returned \d+"}]}}  # the demo model's tools answer sums only
weeks = [(first, ["What is 2+2?", "Hello", "Where is my order?", "Thanks!", "What is 3*5?", "Tell me a joke"]),
         (second, ["What is 12 * 7?", "What is 9-4?", "Hello", "What is 6/3?", "Thanks!", "What is 1+1?"])]
for week, (version, messages) in enumerate(weeks):
    set_current(version)
    for day in range(7):
        for message in messages[day % 3:day % 3 + 4]:
            row = run_robot(None, "chat", message)
            back = 13 - 7 * week - day
            OnlineScore.objects.filter(run_id=row.run_id).update(
                created_at=timezone.now() - dt.timedelta(days=back, hours=1))
print("RUNS", base.pk, other.pk, OnlineScore.objects.count())
'''.replace("HOSTILE", repr(HOSTILE))


@pytest.fixture
def eval_site(tmp_path: Path) -> Iterator[tuple[str, tuple[int, int]]]:
    """The example project seeded with two eval runs and two weeks of online scores, served: its URL, the runs."""
    if not CHROMIUM.exists():
        pytest.skip("needs /usr/bin/chromium (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api")
    manage(tmp_path, "migrate", "--noinput")
    manage(tmp_path, "demo_user")
    done = manage(tmp_path, "shell", "-c", SEED, ROBOTLAB_EXECUTOR="sync")
    runs = next(line for line in done.stdout.splitlines() if line.startswith("RUNS ")).split()
    assert int(runs[3]) == 56  # every production run was scored (rate 1.0): 2 weeks x 7 days x 4 runs
    with served_project(tmp_path) as url:
        yield url, (int(runs[1]), int(runs[2]))


def _shoot(target: Any, name: str, **options: Any) -> None:
    folder = os.environ.get("ROBOTLAB_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        target.screenshot(path=str(Path(folder) / name), **options)


def test_two_runs_compared_and_the_rolling_score_in_chromium(eval_site: tuple[str, tuple[int, int]]) -> None:
    from playwright.sync_api import expect, sync_playwright

    url, (base, other) = eval_site
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(20_000)
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(url + "/admin/login/?next=/admin/robotlab/evalrun/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", "admin")
            page.click("input[type=submit]")
            for pk in (base, other):
                page.check(f"input[name=_selected_action][value='{pk}']")
            page.select_option("select[name=action]", "compare_runs")
            page.click("button[name=index]")
            expect(page).to_have_url(f"{url}/admin/robotlab/evalrun/compare/?base={base}&other={other}")
            cases = page.locator("#robotlab-compare-cases tbody tr")
            expect(cases).to_have_count(8)
            expect(cases.nth(0).locator("td").nth(0)).to_have_text("order status")  # 1 -> 0, worst first
            expect(cases.nth(0).locator("td").nth(1)).to_have_text("worse")
            expect(page.locator("#robotlab-compare-cases")).to_contain_text(HOSTILE)  # as text
            expect(page.locator("svg.robotlab-chart")).to_be_visible()
            expect(page.locator("svg.robotlab-chart text").filter(has_text=HOSTILE)).to_have_count(1)
            assert page.locator("img[src=x]").count() == 0 and dialogs == []
            expect(page.locator("#robotlab-compare-totals")).to_contain_text("-0.125")  # 7/8 -> 6/8
            expect(cases.nth(7).locator("td").nth(1)).to_have_text("better")  # cancel, last
            _shoot(page, "admin-eval-compare-1400.png", full_page=True)

            page.goto(url + "/admin/robotlab/robotresult/usage/?days=14")
            online = page.locator("#robotlab-online")
            rows = page.locator("#robotlab-online-scores tbody tr")
            expect(rows).to_have_count(2)
            expect(rows.nth(0).locator("td").nth(1)).to_have_text("v1")
            expect(rows.nth(1).locator("td").nth(1)).to_have_text("v2")
            expect(online.locator("svg.robotlab-chart polyline")).to_have_count(2)
            _shoot(online, "admin-online-scores-1400.png")

            page.goto(url + "/admin/robotlab/robotversion/")  # issue 30 (1): two versions' diff, side by side
            page.check("#action-toggle")
            page.select_option("select[name=action]", "compare")
            page.click("button[name=index]")
            diff = page.locator("table.robotlab-diff")
            expect(diff.locator("thead th")).to_have_count(2)
            changed = diff.locator("tbody tr:not(.diff-equal)").filter(has_text="You answer")
            expect(changed.first.locator("td").nth(0)).to_have_text("You answer support questions.")
            expect(changed.first.locator("td").nth(1)).to_have_text("You answer briefly.")
            _shoot(page, "admin-version-diff-1400.png", full_page=True)
            assert dialogs == []
        finally:
            browser.close()
