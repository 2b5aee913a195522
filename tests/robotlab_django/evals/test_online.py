"""Online evals: a hashed share of a robot's runs scored off the run's path, stored per run and version."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from celery import current_app

from robotlab.testing import FakeLLM, text
from robotlab_django import services
from robotlab_django.abstract_models import Status
from robotlab_django.evals import online, online_scoring
from robotlab_django.evals.cases import load_yaml
from robotlab_django.evals.eval_runs import run_eval
from robotlab_django.evals.evaluators import Reply, evaluator
from robotlab_django.evals.online_task import score_online_run
from robotlab_django.models import OnlineScore, RobotResult, RobotVersion
from robotlab_django.runs.runner import run_completed
from robotlab_django.versions.choice import set_current

pytestmark = pytest.mark.django_db

REGEX = {"kind": "regex", "pattern": r"order #\d+"}


@evaluator
def broken(reply: Reply) -> float:
    """An evaluator whose backend is down."""
    raise ConnectionError("the grader is unreachable")


BROKEN = {"kind": "callable", "path": f"{__name__}.broken"}


def _configure(settings: Any, rate: float, *evaluators: dict[str, Any], llm: FakeLLM | None = None) -> FakeLLM:
    """``echo``'s online evals at ``rate``; every app-built robot answers from ``llm`` (by default: an order)."""
    llm = llm or FakeLLM(default=text("Your order #42 ships today."))
    settings.ROBOTLAB = {**settings.ROBOTLAB, "LLM": lambda: llm,
                         "ONLINE_EVALS": {"echo": {"rate": rate, "evaluators": list(evaluators) or [REGEX]}}}
    return llm


def test_a_rate_samples_about_that_share_of_runs_the_same_choice_each_time() -> None:
    ids = [f"run-{number}" for number in range(4000)]
    chosen = [online.sampled("support", run_id, 0.3) for run_id in ids]
    assert 0.28 <= sum(chosen) / len(ids) <= 0.32
    assert chosen == [online.sampled("support", run_id, 0.3) for run_id in ids]  # hashed: no randomness
    assert chosen != [online.sampled("billing", run_id, 0.3) for run_id in ids]  # each robot its own share
    assert not any(online.sampled("support", run_id, 0.0) for run_id in ids)
    assert all(online.sampled("support", run_id, 1.0) for run_id in ids)


def test_the_sampled_runs_and_only_they_are_scored_with_their_version(settings: Any) -> None:
    _configure(settings, 0.3)
    version = set_current(RobotVersion.objects.create(robot_name="echo", number=1, prompt="You help with orders."))
    rows = [services.run_robot(f"s{number}", "echo", "Where is my order?") for number in range(40)]
    expected = {row.run_id for row in rows if online.sampled("echo", row.run_id, 0.3)}
    stored = {score.run_id: score for score in OnlineScore.objects.all()}
    assert set(stored) == expected and 6 <= len(expected) <= 18  # 30 % of 40, give or take
    for row in rows:
        if row.run_id in expected:
            score = stored[row.run_id]
            assert (score.result_id, score.version, score.robot_name, score.score) == (row.pk, version, "echo", 1.0)
            assert score.scores[0]["kind"] == "regex" and "matches" in score.scores[0]["reason"]


def test_a_run_of_the_code_is_scored_under_its_prompt_hash(settings: Any) -> None:
    _configure(settings, 1.0, llm=FakeLLM(default=text("No order number, sorry.")))
    row = services.run_robot("s1", "echo", "Where is my order?")
    score = OnlineScore.objects.get()
    assert (score.version, score.code_hash, score.score) == (None, row.code_hash, 0.0)
    assert row.code_hash and "no match" in score.scores[0]["reason"]


def test_a_failing_evaluator_never_fails_the_run_and_is_left_out_of_its_score(settings: Any) -> None:
    _configure(settings, 1.0, BROKEN, {"kind": "regex"}, REGEX)  # the second spec lacks its pattern
    row = services.run_robot("s1", "echo", "Where is my order?")
    assert row.status == Status.COMPLETED and row.reply == "Your order #42 ships today."
    score = OnlineScore.objects.get()
    assert score.score == 1.0  # the regex's: the broken ones are recorded, not counted
    assert [(item["kind"], item["extra"].get("error", False)) for item in score.scores] == [
        ("callable", True), ("regex", True), ("regex", False)]
    assert "ConnectionError: the grader is unreachable" in score.scores[0]["reason"]


def test_a_run_whose_evaluators_all_fail_has_no_score_and_stays_completed(settings: Any) -> None:
    _configure(settings, 1.0, BROKEN)
    row = services.run_robot("s1", "echo", "Where is my order?")
    assert RobotResult.objects.get(pk=row.pk).status == Status.COMPLETED
    assert OnlineScore.objects.get().score is None


def test_a_receiver_that_raises_after_a_run_never_fails_it(settings: Any, caplog: Any) -> None:
    _configure(settings, 0.0)

    def explode(sender: Any = None, row: Any = None, **kwargs: Any) -> None:
        raise RuntimeError("boom")

    run_completed.connect(explode, dispatch_uid="test-explode")
    try:
        with caplog.at_level(logging.ERROR, logger="robotlab_django"):
            row = services.run_robot("s1", "echo", "Hi")
    finally:
        run_completed.disconnect(dispatch_uid="test-explode")
    assert row.status == Status.COMPLETED
    assert any("failed after run" in record.getMessage() for record in caplog.records)


def test_a_bad_configuration_is_warned_about_and_scores_nothing(settings: Any, caplog: Any,
                                                                monkeypatch: Any) -> None:
    _configure(settings, 1.0)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "ONLINE_EVALS": {"echo": {"rate": 3, "evaluators": [REGEX]}}}
    monkeypatch.setattr(online_scoring, "_warned", set())  # warned once per process: this test's own
    with caplog.at_level(logging.WARNING, logger="robotlab_django"):
        row = services.run_robot("s1", "echo", "Hi")
    assert row.status == Status.COMPLETED and not OnlineScore.objects.exists()
    assert any("needs a 'rate' from 0 to 1" in record.getMessage() for record in caplog.records)


def test_the_runs_an_eval_replays_are_not_scored_online(settings: Any) -> None:
    _configure(settings, 1.0)
    eval_set, _count = load_yaml("set: smoke\ncases:\n  - {name: one, input: Hi, recorded: [{content: 'order #1'}]}\n")
    eval_run = run_eval("echo", eval_set, None, offline=True)
    assert eval_run.score is not None and not OnlineScore.objects.exists()


def test_under_celery_the_task_scores_the_run_once(settings: Any,
                                                   django_capture_on_commit_callbacks: Any) -> None:
    _configure(settings, 0.0)
    row = services.run_robot("s1", "echo", "Where is my order?")
    _configure(settings, 1.0)
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "celery"}
    saved = current_app.conf.task_always_eager, current_app.conf.task_eager_propagates
    current_app.conf.update(task_always_eager=True, task_eager_propagates=True)
    try:
        with django_capture_on_commit_callbacks(execute=True) as sent:
            assert online.schedule(row)
        assert len(sent) == 1 and OnlineScore.objects.get().score == 1.0
        assert score_online_run.apply(args=(row.pk,)).get() == 1.0  # a second delivery: the same score
    finally:
        current_app.conf.update(task_always_eager=saved[0], task_eager_propagates=saved[1])
    assert OnlineScore.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_with_the_thread_executor_a_background_thread_scores_the_run(settings: Any) -> None:
    _configure(settings, 1.0)
    row = services.run_robot("s1", "echo", "Where is my order?")  # the sync executor ran it
    OnlineScore.objects.all().delete()
    settings.ROBOTLAB = {**settings.ROBOTLAB, "EXECUTOR": "thread"}
    assert online.schedule(row)
    assert online.join(timeout=30)
    assert OnlineScore.objects.get(run_id=row.run_id).score == 1.0
