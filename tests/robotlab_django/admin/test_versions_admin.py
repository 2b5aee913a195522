"""The versions admin: a new version is numbered and validated, its diff is escaped, set current, compare, roll back."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from robotlab_django.models import RobotLabel, RobotVersion
from robotlab_django.versions.choice import set_current
from robotlab_django.versions.diff import DiffRow, side_by_side

pytestmark = pytest.mark.django_db

PAYLOAD = "<script>alert('xss')</script>"

URL = "/admin/robotlab/robotversion/"


def _add(client: Client, **fields: str) -> object:
    data = {"robot_name": "calculator", "prompt": "", "model": "", "params": "{}", "tools": "null",
            "token_budget": "", "cost_budget": "", "note": "", **fields}
    return client.post(f"{URL}add/", data)


def test_a_new_version_takes_the_next_number_and_its_author(admin_client: Client) -> None:
    _add(admin_client, prompt="You add.", tools='["add"]')
    _add(admin_client, prompt="You add numbers carefully.")
    versions = list(RobotVersion.objects.order_by("number"))
    assert [(v.number, v.tools) for v in versions] == [(1, ["add"]), (2, None)]
    assert versions[0].created_by == get_user_model().objects.get(username="admin")


def test_a_version_must_name_a_registered_robot_and_its_own_tools(admin_client: Client) -> None:
    response = _add(admin_client, robot_name="nobody")
    assert "No robot is registered under this name." in response.content.decode()  # type: ignore[attr-defined]
    response = _add(admin_client, tools='["rm_rf"]')
    assert "The robot has no tool rm_rf." in response.content.decode()  # type: ignore[attr-defined]
    assert not RobotVersion.objects.exists()


def test_the_change_page_shows_the_diff_against_the_version_before_escaped(admin_client: Client) -> None:
    RobotVersion.objects.create(robot_name="echo", number=1, prompt="Line one.\nLine two.")
    second = RobotVersion.objects.create(robot_name="echo", number=2, prompt=f"Line one.\n{PAYLOAD}", model="m2")
    page = admin_client.get(f"{URL}{second.pk}/change/").content.decode()
    assert PAYLOAD not in page
    assert "&lt;script&gt;alert(&#x27;xss&#x27;)&lt;/script&gt;" in page
    assert "Line two." in page and "diff-replace" in page and "&quot;m2&quot;" in page


def test_actions_set_current_compare_and_roll_back(admin_client: Client) -> None:
    first = set_current(RobotVersion.objects.create(robot_name="echo", number=1, prompt="Old."))
    second = RobotVersion.objects.create(robot_name="echo", number=2, prompt="New.")
    RobotLabel.objects.create(robot_name="echo", name="canary", version=second, rollout_percent=30)
    admin_client.post(URL, {"action": "make_current", "_selected_action": [second.pk]})
    assert RobotVersion.objects.get(is_current=True) == second
    page = admin_client.post(URL, {"action": "compare", "_selected_action": [first.pk, second.pk]})
    text = page.content.decode()
    assert "echo v1 against echo v2" in text and "Old." in text and "New." in text
    admin_client.post(URL, {"action": "roll_back", "_selected_action": [second.pk]})
    assert RobotVersion.objects.get(is_current=True) == first
    assert RobotLabel.objects.get().rollout_percent == 0


def test_a_viewer_without_change_rights_cannot_set_current() -> None:
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_robotversion"))
    client = Client()
    client.force_login(user)
    version = RobotVersion.objects.create(robot_name="echo", number=1)
    client.post(URL, {"action": "make_current", "_selected_action": [version.pk]})
    assert not RobotVersion.objects.filter(is_current=True).exists()


def test_side_by_side_aligns_changed_lines() -> None:
    assert side_by_side("a\nb\nc", "a\nB\nc\nd") == [
        DiffRow("equal", "a", "a"), DiffRow("replace", "b", "B"), DiffRow("equal", "c", "c"),
        DiffRow("insert", "", "d")]


def test_a_run_page_links_to_a_case_filled_from_the_run(admin_client: Client) -> None:
    from robotlab.testing import FakeLLM
    from robotlab_django import services

    services.run_robot("s1", "echo", "Hi", llm=FakeLLM(["Hello!"]))
    row = services.run_robot("s1", "echo", f"Say {PAYLOAD}", llm=FakeLLM([PAYLOAD]))
    page = admin_client.get(f"/admin/robotlab/robotresult/{row.pk}/change/").content.decode()
    assert f"/admin/robotlab/evalcase/add/?source={row.pk}" in page
    form = admin_client.get(f"/admin/robotlab/evalcase/add/?source={row.pk}").content.decode()
    assert PAYLOAD not in form and "Hello!" in form and "&lt;script&gt;" in form
