"""The rolling online score per version: folded per day over a window, and shown on the admin's usage page."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from robotlab_django.evals.rolling import rolling_scores
from robotlab_django.models import OnlineScore, RobotVersion

pytestmark = pytest.mark.django_db

PAYLOAD = "<img src=x onerror=alert(1)>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"
USAGE = "/admin/robotlab/robotresult/usage/"


def _score(robot: str, score: float | None, days_ago: int, *, version: RobotVersion | None = None,
           code_hash: str = "") -> None:
    when = dt.datetime.combine(timezone.localdate() - dt.timedelta(days=days_ago), dt.time(12),
                               tzinfo=timezone.get_current_timezone())
    OnlineScore.objects.create(robot_name=robot, version=version, code_hash=code_hash, score=score,
                               run_id=f"{robot}-{OnlineScore.objects.count()}", created_at=when)


@pytest.fixture
def versions() -> tuple[RobotVersion, RobotVersion]:
    """``echo`` v1 scored over the last five days, v2 once before them, and its code today."""
    first = RobotVersion.objects.create(robot_name="echo", number=1)
    second = RobotVersion.objects.create(robot_name="echo", number=2)
    for score, days_ago in ((1.0, 4), (0.0, 4), (1.0, 2), (0.5, 0)):
        _score("echo", score, days_ago, version=first)
    _score("echo", 0.2, 6, version=second)
    _score("echo", 0.9, 0, code_hash="c0ffee" * 10)
    _score("echo", None, 0, code_hash="c0ffee" * 10)  # no evaluator could score it: left out
    return first, second


def test_each_days_score_is_the_mean_of_the_window_up_to_it(versions: tuple[RobotVersion, RobotVersion]) -> None:
    report = rolling_scores(days=5, window=3)
    by_label = {series.label: series for series in report.series}
    assert list(by_label) == ["echo v1", "echo v2", "echo code c0ffeec0"]
    first, second, code = by_label.values()
    assert first.rolling == pytest.approx([0.5, 0.5, 2 / 3, 1.0, 0.75])
    assert first.window_runs == [2, 2, 3, 1, 2]
    assert (first.runs, first.mean, first.latest) == (4, 0.625, 0.75)
    assert second.rolling == [0.2, None, None, None, None]  # its score, six days ago, is in the first day's window
    assert (second.runs, second.mean, second.latest) == (0, None, None)
    assert (code.rolling[-1], code.runs) == (0.9, 1)
    assert [day.isoformat() for day in report.days][-1] == timezone.localdate().isoformat()


def test_the_report_keeps_one_robots_versions(versions: tuple[RobotVersion, RobotVersion]) -> None:
    _score("other", 1.0, 0)
    assert {series.robot_name for series in rolling_scores(days=5).series} == {"echo", "other"}
    assert {series.robot_name for series in rolling_scores(days=5, robot_name="other").series} == {"other"}


def test_the_usage_page_shows_the_rolling_score_per_version(admin_client: Client,
                                                            versions: tuple[RobotVersion, RobotVersion]) -> None:
    page = admin_client.get(f"{USAGE}?days=7").content.decode()
    table = page[page.index('id="robotlab-online-scores"'):]
    table = table[:table.index("</table>")]
    rows = [re.sub(r">\s+<", "><", row) for row in table.split("<tr>")[2:]]  # 7 days, a 7-day window: all in
    assert rows[0].startswith("<td>echo</td><td>v1</td><td>4</td><td>0.625</td><td>0.625</td>")
    assert rows[1].startswith("<td>echo</td><td>v2</td><td>1</td><td>0.200</td><td>0.200</td>")
    assert rows[2].startswith("<td>echo</td><td>code c0ffeec0</td><td>1</td><td>0.900</td><td>0.900</td>")
    start = page.index('<svg class="robotlab-chart" viewBox="0 0 760 240" width="100%" role="img" aria-label="Online')
    svg = page[start:page.index("</svg>", start)]
    assert svg.count("<polyline") == 3 and "echo v1: 0.50 over 2 run(s)" in svg


def test_a_hostile_robot_name_is_escaped_in_the_table_and_the_chart(admin_client: Client) -> None:
    _score(PAYLOAD, 1.0, 0)
    page = admin_client.get(USAGE).content.decode()
    assert PAYLOAD not in page
    start = page.index('aria-label="Online')
    assert ESCAPED in page[page.index('id="robotlab-online-scores"'):] and ESCAPED in page[start:]


def test_the_usage_page_says_when_nothing_was_scored(admin_client: Client) -> None:
    assert "No run was scored by online evals in this period." in admin_client.get(USAGE).content.decode()


def test_the_rolling_scores_need_the_view_permission_on_results(versions: tuple[RobotVersion, RobotVersion]) -> None:
    user = get_user_model().objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(user)
    assert client.get(USAGE).status_code == 403
    user.user_permissions.add(Permission.objects.get(codename="view_robotresult"))
    assert "echo v1" in client.get(USAGE).content.decode()
