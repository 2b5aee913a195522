"""robotlab.robot.rehearsal: a robot turn of its own, answered in memory, that no global hook or span sees."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import robotlab
from robotlab import hooks
from robotlab.config import configure, get_config
from robotlab.hooks import Hook
from robotlab.llm.direct import OpenAICompatibleLLM
from robotlab.robot import rehearsal
from robotlab.testing import FakeLLM
from robotlab.testing.server import FakeLLMServer
from tests.robotlab.spans import recording


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(default="Hello") as running:
        yield running


class _Seen(Hook):
    """A global hook that notes every run it sees."""

    namespace = "seen"
    runs: list[str] = []

    def before_run(cls, ctx: Any) -> None:
        cls.runs.append(str(ctx.robot.name))


def test_a_rehearsal_runs_a_robot_of_its_own_in_memory_that_no_global_hook_or_span_sees(
        server: FakeLLMServer) -> None:
    llm = OpenAICompatibleLLM(api_base=server.base_url, api_key="sk-fake")
    config = get_config()
    saved = config.instrument
    configure(instrument=True)
    hooks.clear_hooks().on(_Seen)
    _Seen.runs.clear()
    try:
        with recording() as recorder:
            assert rehearsal.rehearse([("openai/gpt-4o-mini", llm)]) == [
                "rehearsed a run of openai/gpt-4o-mini ('Ready.')"]
            assert recorder.spans() == [] and _Seen.runs == []
            assert server.requests == []  # answered in memory: the models' own client sent nothing
            # the same hook and recorder see a run of the application's own
            robotlab.build(name="own", model="openai/gpt-4o-mini", llm=llm).run("Hi")
            assert _Seen.runs == ["own"] and [span.name for span in recorder.named("invoke_agent")] == [
                "invoke_agent own"]
            assert len(server.requests) == 1
    finally:
        hooks.clear_hooks()
        config.instrument = saved


def test_nothing_is_rehearsed_without_a_direct_model() -> None:
    assert rehearsal.rehearse([("openai/gpt-4o-mini", FakeLLM(["never"]))]) == []
    assert rehearsal.rehearse([]) == []

