"""The networks built for distributed turns in a process (robotlab_django.networks.built): a turn's later jobs here
reuse its network, a robot runs once, and what a job sets on the network stays its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from robotlab.network import Network
from robotlab_django.networks import built
from robotlab_django.runs.records import start_run
from robotlab_django.runs.runnables import build_network

pytestmark = pytest.mark.django_db


@pytest.fixture
def turn(settings: Any) -> Iterator[Any]:
    settings.ROBOTLAB = {**settings.ROBOTLAB, "NETWORKS": {"fanout": "tests.robotlab_django.fanout.fanout_network"}}
    row = start_run("s1", "fanout", "Split it")
    yield row
    built.forget(row)


def test_a_turns_later_jobs_reuse_its_network_and_each_robot_runs_once(turn: Any) -> None:
    builds: list[Network] = []

    def build() -> tuple[Network, int]:
        builds.append(build_network("fanout"))
        return builds[-1], 0

    start, _ = built.take(turn, None, build)  # the turn's start: no robot taken
    plan, _ = built.take(turn, "plan", build)
    branch, _ = built.take(turn, "branch_1", build)
    assert len(builds) == 1 and plan.tasks is branch.tasks is builds[0].tasks
    again, _ = built.take(turn, "plan", build)  # the plan run again here (a retry): its robot ran already
    assert len(builds) == 2 and again.tasks["plan"].robot is not plan.tasks["plan"].robot
    built.forget(turn)  # the turn ended
    built.take(turn, "branch_2", build)
    assert len(builds) == 3


def test_what_a_job_sets_on_the_network_stays_its_own(turn: Any) -> None:
    network = build_network("fanout")
    first, _ = built.take(turn, "branch_1", lambda: (network, 0))
    second, _ = built.take(turn, "branch_2", lambda: (network, 0))
    first.budget = None  # a job wraps its budget (a checkpointed task does)
    first.memory.set("seen", 1)
    assert second.budget is network.budget and not second.memory.has_key("seen")
    assert not network.memory.has_key("seen")


def test_a_job_with_its_own_llm_or_options_builds_its_own(turn: Any, settings: Any) -> None:
    from robotlab.testing import FakeLLM
    from robotlab_django.networks.distributed import _network

    settings.ROBOTLAB = {**settings.ROBOTLAB, "NETWORK_MEMORY_URL": None}
    kept, _ = _network(turn, None, None, "plan")
    own, _ = _network(turn, FakeLLM([]), None, "branch_1")
    assert own.tasks is not kept.tasks
    assert _network(turn, None, None, "branch_1")[0].tasks is kept.tasks
