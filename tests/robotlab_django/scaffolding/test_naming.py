"""Name normalisation."""

from __future__ import annotations

import pytest

from robotlab_django.scaffolding.naming import InvalidNameError, app_name, robot_name, snake_case, tool_name


@pytest.mark.parametrize("raw", ["Support", "support", "SupportRobot", "support_robot", "  Support  "])
def test_robot_name_spellings_give_the_same_robot(raw: str) -> None:
    name = robot_name(raw)
    assert (name.robot_name, name.class_name, name.module, name.title) == (
        "support", "SupportRobot", "support_robot", "Support")


@pytest.mark.parametrize(("raw", "robot", "cls"), [
    ("BillingHelper", "billing_helper", "BillingHelperRobot"),
    ("billing_helper", "billing_helper", "BillingHelperRobot"),
    ("HTTPSupport", "http_support", "HttpSupportRobot"),
    ("Billing2Go", "billing2_go", "Billing2GoRobot"),
    ("RobotSupport", "robot_support", "RobotSupportRobot"),
])
def test_robot_name_words(raw: str, robot: str, cls: str) -> None:
    assert (robot_name(raw).robot_name, robot_name(raw).class_name) == (robot, cls)


@pytest.mark.parametrize(("raw", "message"), [
    ("123", "not a valid robot name"),
    ("my-robot", "not a valid robot name"),
    ("café", "not a valid robot name"),
    ("class", "Python keyword"),
    ("_private", "underscore"),
    ("Robot", "'Robot' alone"),
    ("", "empty"),
])
def test_invalid_robot_names_are_refused_with_a_reason(raw: str, message: str) -> None:
    with pytest.raises(InvalidNameError, match=message):
        robot_name(raw)


def test_tool_and_app_names() -> None:
    assert tool_name("LookupOrder") == "lookup_order"
    assert tool_name("get_weather") == "get_weather"
    assert snake_case("HTTPClient") == "http_client"
    assert app_name("chat") == "chat"
    with pytest.raises(InvalidNameError):
        tool_name("lookup-order")
    with pytest.raises(InvalidNameError):
        app_name("my app")
