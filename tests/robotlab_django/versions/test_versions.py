"""Robot versions: a version pins a run's prompt and model, rollouts are sticky per thread, rollback, recording."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.models import RobotLabel, RobotResult, RobotVersion
from robotlab_django.versions.choice import NoSuchVersionError, bucket, choose, resolve, rollback, set_current
from robotlab_django.versions.parts import settings_of

pytestmark = pytest.mark.django_db


def _version(number: int, robot: str = "echo", **parts: Any) -> RobotVersion:
    return RobotVersion.objects.create(robot_name=robot, number=number, **parts)


def test_a_robot_without_versions_runs_its_code_and_records_the_code_hash(
        scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("hi"))
    row = services.run_robot("s1", "echo", "hello")
    assert llm.requests[0].messages[0] == {"role": "system", "content": "You echo."}
    stored = RobotResult.objects.get(pk=row.pk)
    assert stored.version is None and len(stored.code_hash) == 64


def test_the_current_version_pins_the_prompt_model_and_parameters(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("hi"))
    version = set_current(_version(1, prompt="---\nmax_tokens: 77\nparameters:\n  n: 3\n---\nYou are v{{ n }}.\n",
                                   model="gpt-test-2", params={"temperature": 0.25, "seed": 7}))
    _version(2, prompt="Not current.")
    row = services.run_robot("s1", "echo", "hello")
    request = llm.requests[0]
    assert request.messages[0] == {"role": "system", "content": "You are v3."}
    assert request.model == "gpt-test-2"
    assert request.params["temperature"] == 0.25 and request.params["seed"] == 7
    assert request.params["max_tokens"] == 77
    stored = RobotResult.objects.get(pk=row.pk)
    assert stored.version == version and stored.code_hash == ""


def test_a_version_keeps_only_the_tools_it_names_and_sets_the_budget(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("no tools"))
    set_current(_version(1, robot="calculator", tools=[], token_budget=5000, cost_budget=Decimal("0.5")))
    services.run_robot("s1", "calculator", "1+1?")
    assert llm.requests[0].tools == []
    assert llm.requests[0].messages[0]["content"] == "You add numbers."


def test_a_row_pinned_to_a_version_runs_it_whatever_is_current(scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(text("a"))
    set_current(_version(1, prompt="One."))
    pinned = _version(2, prompt="Two.")
    row = services.start_run("s1", "echo", "hello")
    RobotResult.objects.filter(pk=row.pk).update(version=pinned)
    services.execute_run(row.pk)
    assert llm.requests[0].messages[0]["content"] == "Two."
    assert RobotResult.objects.get(pk=row.pk).version == pinned


def test_a_30_percent_rollout_takes_about_30_percent_of_new_threads_sticky_per_thread(
        scripted_llm: Callable[..., FakeLLM]) -> None:
    scripted_llm()
    stable = set_current(_version(1, prompt="Stable."))
    canary = _version(2, prompt="Canary.")
    RobotLabel.objects.create(robot_name="echo", name="canary", version=canary, rollout_percent=30)
    chosen = {key: choose("echo", key) for key in range(1, 201)}
    share = sum(version == canary for version in chosen.values())
    assert 40 <= share <= 80  # 30 +/- 10 % of 200
    assert set(chosen.values()) == {stable, canary}
    assert all(choose("echo", key) == version for key, version in chosen.items())  # sticky
    assert all(0 <= bucket("echo", key) < 100 for key in chosen)


def test_a_30_percent_rollout_sends_about_30_percent_of_200_new_threads_runs_to_the_label_sticky(
        scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm(*["ok"] * 400)
    stable = set_current(_version(1, prompt="Stable."))
    canary = _version(2, prompt="Canary.")
    RobotLabel.objects.create(robot_name="echo", name="canary", version=canary, rollout_percent=30)
    first = [services.run_robot(f"rollout-{index}", "echo", "one") for index in range(200)]
    again = [services.run_robot(f"rollout-{index}", "echo", "two") for index in range(200)]
    versions = dict(RobotResult.objects.filter(pk__in=[row.pk for row in first + again])
                    .values_list("pk", "version_id"))
    share = sum(versions[row.pk] == canary.pk for row in first)
    assert 40 <= share <= 80  # 30 +/- 10 % of 200 new threads
    assert {versions[row.pk] for row in first} == {stable.pk, canary.pk}
    assert all(versions[a.pk] == versions[b.pk] for a, b in zip(first, again, strict=True))  # sticky per thread
    prompts = [request.messages[0]["content"] for request in llm.requests]  # each run ran its version's prompt
    assert prompts == ["Canary." if versions[row.pk] == canary.pk else "Stable." for row in first + again]


def test_runs_of_one_thread_stay_on_its_version_and_rollback_moves_new_runs_at_once(
        scripted_llm: Callable[..., FakeLLM]) -> None:
    llm = scripted_llm("a", "b", "c", "d")
    stable = set_current(_version(1, prompt="Stable."))
    canary = _version(2, prompt="Canary.")
    RobotLabel.objects.create(robot_name="echo", name="canary", version=canary, rollout_percent=100)
    first = services.run_robot("s1", "echo", "one")
    second = services.run_robot("s1", "echo", "two")
    assert RobotResult.objects.get(pk=first.pk).version == canary == RobotResult.objects.get(pk=second.pk).version
    rollback("echo")
    third = services.run_robot("s1", "echo", "three")
    fresh = services.run_robot("s2", "echo", "new thread")
    assert RobotResult.objects.get(pk=third.pk).version == stable == RobotResult.objects.get(pk=fresh.pk).version
    assert [request.messages[0]["content"] for request in llm.requests] == ["Canary.", "Canary.", "Stable.",
                                                                            "Stable."]
    assert RobotLabel.objects.get(name="canary").rollout_percent == 0


def test_rollback_restores_the_version_current_before() -> None:
    first = set_current(_version(1))
    second = set_current(_version(2))
    assert list(RobotVersion.objects.filter(is_current=True)) == [second]
    assert rollback("echo") == first
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.is_current and not second.is_current
    assert rollback("echo") == first  # nothing before it: it stays


def test_resolve_finds_a_version_by_number_label_or_current() -> None:
    first = set_current(_version(1))
    second = _version(2)
    RobotLabel.objects.create(robot_name="echo", name="production", version=second)
    assert resolve("echo", "v2") == second == resolve("echo", 2) == resolve("echo", "production")
    assert resolve("echo", "current") == first
    with pytest.raises(NoSuchVersionError, match="no version 'staging'"):
        resolve("echo", "staging")


def test_settings_of_a_version_are_plain_values() -> None:
    version = _version(1, model="m", params={"temperature": 0.1}, tools=["add"], cost_budget=Decimal("1.50"))
    assert settings_of(version) == {"model": "m", "params": {"temperature": 0.1}, "tools": ["add"],
                                    "token_budget": None, "cost_budget": "1.5"}
