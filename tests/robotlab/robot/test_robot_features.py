from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import robotlab
from robotlab import hooks
from robotlab.delegation import DelegationFuture
from robotlab.errors import DelegationTimeout, DependencyError, InferenceError
from robotlab.hooks import Hook
from robotlab.llm import LLMRequest, LLMResponse
from robotlab.testing import FakeLLM, raise_, text

calls: list[str] = []


@pytest.fixture(autouse=True)
def fresh_hooks() -> Iterator[None]:
    hooks.clear_hooks()
    calls.clear()
    yield
    hooks.clear_hooks()


# -- learn ---------------------------------------------------------------------------------------------
def test_learn_ignores_blank_text_and_none_and_strips() -> None:
    robot = robotlab.build(llm=FakeLLM([]))
    assert robot.learn(None).learn("").learn(" \t\n") is robot
    assert robot.learnings == []
    assert robot.memory.get("learnings") is None  # nothing stored, nothing written
    robot.learn("\t be brief \n")
    assert robot.learnings == ["be brief"]


def test_a_new_learning_replaces_every_learning_it_contains_and_goes_last() -> None:
    robot = robotlab.build(llm=FakeLLM([]))
    robot.learn("json").learn("cite sources").learn("output").learn("answer in json output")
    assert robot.learnings == ["cite sources", "answer in json output"]
    robot.learn("cite sources")  # equal to a learning: nothing changes, and it does not move
    robot.learn("in json")  # contained in a learning: not stored
    assert robot.learnings == ["cite sources", "answer in json output"]
    assert robot.memory.get("learnings") == ["cite sources", "answer in json output"]


def test_learnings_and_the_memory_copy_are_copies() -> None:
    robot = robotlab.build(llm=FakeLLM([]))
    robot.learn("be brief")
    robot.learnings.append("hacked")
    robot.memory.get("learnings").append("hacked too")
    assert robot.learnings == ["be brief"]
    assert robot.inject_learnings("hi") == "LEARNINGS FROM PREVIOUS RUNS:\n- be brief\n\nhi"
    assert robotlab.build(llm=FakeLLM([])).inject_learnings("hi") == "hi"


class StoredSpy(Hook):
    def on_learn(cls, ctx: Any) -> None:
        calls.append(f"{ctx.text}:{ctx.stored}:{list(ctx.learnings_before)}")


def test_on_learn_reports_stored_and_the_learnings_before() -> None:
    robot = robotlab.build(llm=FakeLLM([]))
    hooks.on(StoredSpy)
    robot.learn("use utc").learn("use utc").learn("always use utc")
    assert calls == ["use utc:True:[]", "use utc:False:['use utc']", "always use utc:True:['use utc']"]


# -- compress_history ----------------------------------------------------------------------------------
def tool_exchange(call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call_id, "name": "lookup", "content": "Medieval castle records from Lyon"},
    ]  # fmt: skip


def python_turns(count: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for i in range(count):
        turns += [
            {"role": "user", "content": f"How do I configure the python logging module handlers {i}?"},
            {"role": "assistant", "content": f"Configure python logging handlers with dictConfig {i}"},
        ]
    return turns


def test_compress_history_never_orphans_a_tool_result() -> None:
    old = [
        {"role": "user", "content": "Tell me about the history of medieval castles in France"},
        *tool_exchange("call_1"),
        {"role": "assistant", "content": "Medieval French castles were built for defence and prestige"},
    ]
    old[1]["content"] = "Let me look up the medieval castle archives for you"  # text and tool calls
    robot = robotlab.build(llm=FakeLLM([]), system_prompt="Be helpful.")
    robot.replace_messages(old + python_turns(3))
    robot.compress_history()
    assert robot.messages == [old[1], old[2], *python_turns(3)]  # the pair stays, together and in order
    assert robot.instructions == "Be helpful."


def test_compress_history_summarizes_middling_turns_and_validates_thresholds() -> None:
    related = {"role": "user", "content": "Is the python logging module thread safe for my web app?"}
    unrelated = {"role": "assistant", "content": "Medieval French castles were built for defence and prestige"}
    robot = robotlab.build(llm=FakeLLM([]))
    robot.replace_messages([related, unrelated, *python_turns(2)])
    seen: list[str] = []

    def summarize(text: str) -> str:
        seen.append(text)
        return "  Asked whether logging is thread safe.  "

    robot.compress_history(recent_turns=2, keep_threshold=0.99, drop_threshold=0.01, summarizer=summarize)
    assert seen == [related["content"]]
    assert robot.messages == [{"role": "user", "content": "Asked whether logging is thread safe."}, *python_turns(2)]
    with pytest.raises(ValueError, match=r"^keep_threshold \(0\.2\) must be greater than drop_threshold \(0\.2\)$"):
        robot.compress_history(keep_threshold=0.2, drop_threshold=0.2)


# -- auto_compact ----------------------------------------------------------------------------------------
class CompactionSpy(Hook):
    def before_compaction(cls, ctx: Any) -> None:
        calls.append(f"{ctx.strategy}:{len(ctx.messages_before)}")


class UnknownModels:
    def get_model_info(self, model: str) -> dict[str, Any]:
        raise ValueError(f"unknown model {model}")


@pytest.mark.parametrize(("threshold", "compacts"), [(0.0625, True), (0.0626, False)])
def test_context_window_counts_instructions_and_history_against_the_default_window(
    monkeypatch: pytest.MonkeyPatch, threshold: float, compacts: bool
) -> None:
    monkeypatch.setattr("robotlab.llm.load_litellm", UnknownModels)
    config = {"auto_compact": "context_window", "compact_threshold": threshold}
    robot = robotlab.build(llm=FakeLLM(["a1", "a2"]), model="openai/unknown", system_prompt="s" * 10_000,
                           config=config)  # fmt: skip
    robot.on(CompactionSpy)
    robot.run("q" * 39_998)  # 10_000 + 39_998 + len("a1") = 50_000 characters = 12_500 tokens
    robot.run("next")
    # 12_500 >= 200_000 * 0.0625 = 12_500 compacts; 200_000 * 0.0626 = 12_520 does not
    assert calls == (["context_window:2"] if compacts else [])


def test_auto_compact_is_skipped_for_none_an_empty_history_and_an_unknown_strategy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for setting in ("none", "nonsense"):
        robot = robotlab.build(name="bot", llm=FakeLLM(["a1", "a2"]),
                               config={"auto_compact": setting, "compact_threshold": 0.0})  # fmt: skip
        robot.on(CompactionSpy)
        robot.run("q1")
        robot.run("q2")
    assert calls == []
    assert "[bot] auto_compact: unknown strategy 'nonsense'; skipping compaction" in caplog.messages


def test_auto_compact_without_the_stemmer_logs_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def missing() -> None:
        raise DependencyError("the stemmer is missing")

    monkeypatch.setattr("robotlab.text.compression.text_analysis.require_classifier", missing)
    llm = FakeLLM(["a1", "a2"])
    robot = robotlab.build(name="bot", llm=llm, config={"auto_compact": "context_window", "compact_threshold": 0.0})
    robot.replace_messages(python_turns(4))
    with caplog.at_level(logging.WARNING, logger="robotlab"):
        result = robot.run("next")
    assert result.reply == "a1"
    assert "[bot] auto_compact: the stemmer is missing; skipping compaction" in caplog.messages
    assert len(llm.requests[0].messages) == 9  # nothing was dropped


async def test_an_async_custom_strategy_is_awaited() -> None:
    async def keep_last(robot: Any) -> None:
        await asyncio.sleep(0)
        robot.replace_messages(robot.messages[-1:])

    llm = FakeLLM(["a1", "a2"])
    robot = robotlab.build(llm=llm, config={"auto_compact": keep_last})
    await robot.arun("q1")
    await robot.arun("q2")
    assert [m["content"] for m in llm.requests[1].messages] == ["a1", "q2"]


# -- search_history --------------------------------------------------------------------------------------
def test_search_history_finds_relevant_messages_with_their_index() -> None:
    robot = robotlab.build(llm=FakeLLM([]), system_prompt="You answer questions about the python logging module.")
    robot.replace_messages(
        [
            {"role": "user", "content": "What is the capital city of France?"},
            {"role": "assistant", "content": "The capital city of France is Paris."},
            {"role": "user", "content": "How do I rotate python log files every night?"},
            {"role": "assistant", "content": "Use a TimedRotatingFileHandler for nightly log rotation."},
            {"role": "user", "content": "ok"},
        ]
    )
    hits = robot.search_history("rotating log files")
    assert [(hit.index, hit.role) for hit in hits] == [(2, "user"), (3, "assistant")]
    assert hits[0].text == robot.messages[2]["content"]
    assert 0 < hits[1].score <= hits[0].score <= 1
    assert [hit.index for hit in robot.search_history("capital of France")] == [0, 1]
    assert [hit.index for hit in robot.search_history("capital of France", limit=1)] == [0]
    assert robot.search_history("the and of") == []
    with pytest.raises(ValueError, match="^limit must not be negative, got -1$"):
        robot.search_history("x", limit=-1)


# -- delegation ----------------------------------------------------------------------------------------
def test_sync_delegation_returns_the_result_marked_with_duration_and_delegator() -> None:
    analyst_llm = FakeLLM([text("Q3 revenue grew 12%.", usage=(30, 7))])
    analyst = robotlab.build(name="analyst", llm=analyst_llm)
    manager = robotlab.build(name="manager", llm=FakeLLM([]))
    result = manager.delegate(to=analyst, task="Summarize the Q3 report.", memory={"quarter": "Q3"})
    assert result.reply == "Q3 revenue grew 12%."
    assert result.delegated_by == "manager" and result.robot_name == "analyst"
    assert result.duration is not None and result.duration >= 0
    assert result.output_tokens == 7
    assert analyst.memory.get("quarter") == "Q3"  # run keyword arguments are forwarded
    assert analyst_llm.requests[0].messages[-1]["content"] == "Summarize the Q3 report."
    assert manager.messages == []


class Gate:
    """An LLM that answers only once ``gate`` is set, and records the loop it ran on."""

    def __init__(self, reply: str = "done", *, open_: bool = False) -> None:
        self.gate = threading.Event()
        if open_:
            self.gate.set()
        self.reply = reply
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def complete(self, request: LLMRequest, *, on_text: Any = None) -> LLMResponse:
        self.loops.append(asyncio.get_running_loop())
        if not await asyncio.to_thread(self.gate.wait, 10):
            raise AssertionError("the gate was never opened")
        return LLMResponse(content=self.reply, finish_reason="stop")


def test_async_delegation_from_sync_code_times_out_then_resolves() -> None:
    llm = Gate("analysis")
    analyst = robotlab.build(name="analyst", llm=llm)
    manager = robotlab.build(name="manager", llm=FakeLLM([]))
    future = manager.delegate(to=analyst, task="Analyze Q3", async_=True)
    assert isinstance(future, DelegationFuture)
    assert (future.robot_name, future.delegated_by) == ("analyst", "manager")
    assert not future.is_resolved
    with pytest.raises(DelegationTimeout, match=r"^Delegation to 'analyst' timed out after 0\.05s$"):
        future.value(timeout=0.05)
    llm.gate.set()
    result = future.value(timeout=10)
    assert future.is_resolved
    assert (result.reply, result.delegated_by) == ("analysis", "manager")
    assert result.duration is not None and result.duration > 0


def test_async_delegation_fans_out_and_rejects_with_the_delegatees_error() -> None:
    writer = robotlab.build(name="writer", llm=Gate("draft", open_=True))
    broken = robotlab.build(name="broken", llm=FakeLLM([raise_(InferenceError("provider down"))]))
    manager = robotlab.build(name="manager", llm=FakeLLM([]))
    ok, failing = (manager.delegate(to=robot, task="go", async_=True) for robot in (writer, broken))
    assert ok.value(timeout=10).reply == "draft"
    for _ in range(2):  # the error is raised again on every call
        with pytest.raises(InferenceError, match="provider down"):
            failing.value(timeout=10)
    assert failing.is_resolved


async def test_async_delegation_in_a_coroutine_runs_on_the_running_loop() -> None:
    llm = Gate("analysis", open_=True)
    analyst = robotlab.build(name="analyst", llm=llm)
    manager = robotlab.build(name="manager", llm=FakeLLM([]))
    future = manager.delegate(to=analyst, task="Analyze", async_=True)
    result = await future
    assert result.reply == "analysis" and result.delegated_by == "manager"
    assert llm.loops == [asyncio.get_running_loop()]
    direct = await manager.adelegate(to=analyst, task="Again")
    assert direct.delegated_by == "manager" and direct.duration is not None


def test_the_delegatee_runs_with_its_own_hooks_not_the_delegators() -> None:
    class Spy(Hook):
        @classmethod
        def before_run(cls, ctx: Any) -> None:
            calls.append(f"{cls.__name__}:{ctx.robot.name}")

    class ManagerSpy(Spy):
        pass

    class AnalystSpy(Spy):
        pass

    analyst = robotlab.build(name="analyst", llm=FakeLLM(["a", "b"]))
    manager = robotlab.build(name="manager", llm=FakeLLM([]))
    manager.on(ManagerSpy)
    analyst.on(AnalystSpy)
    manager.delegate(to=analyst, task="one")
    manager.delegate(to=analyst, task="two", async_=True).value(timeout=10)
    assert calls == ["AnalystSpy:analyst", "AnalystSpy:analyst"]
