"""The AskUser channels: the terminal prompt byte for byte, and a queue that is answered later."""

from __future__ import annotations

import asyncio
import io
import sys
import threading
from collections.abc import Sequence
from typing import Any

import pytest

import robotlab
from robotlab.errors import ToolError
from robotlab.testing import FakeLLM, text, tool_call
from robotlab.tools import AskUser
from robotlab.tools.ask import AskChannel, AskRequest, QueueChannel, TerminalChannel, ask_via, resolve_answer


class _Robot:
    def __init__(self, answer: str = "", name: Any = "helper") -> None:
        self.name = name
        self.input = io.StringIO(answer)
        self.output = io.StringIO()


# ---- resolve_answer ----------------------------------------------------------------------------


def test_resolve_answer_follows_ruby_ask_user() -> None:
    assert resolve_answer("", None, "Bob") == "Bob"
    assert resolve_answer("", None, "") == ""  # "" is a default that was given
    assert resolve_answer("", None, None) == ""
    assert resolve_answer("2", ["red", "blue"], None) == "blue"
    assert resolve_answer("", ["red", "blue"], "2") == "blue"  # the default is read like an answer
    assert resolve_answer("0", ["red"], None) == "0"
    assert resolve_answer("3", ["red", "blue"], None) == "3"
    assert resolve_answer("²", ["red"], None) == "²"  # only ASCII digits pick a choice
    assert resolve_answer(" 1", ["red"], None) == " 1"
    assert resolve_answer("1", "abc", None) == "1"  # not a list: no choices
    assert resolve_answer("1", [], None) == "1"


# ---- TerminalChannel ---------------------------------------------------------------------------


def test_terminal_prompt_is_byte_for_byte_ruby() -> None:
    robot = _Robot("2\n")
    assert TerminalChannel().ask("Which?", ["red", "blue"], None, robot) == "blue"
    assert robot.output.getvalue() == "\n[helper] Which?\n  1. red\n  2. blue\n> "


def test_terminal_prompt_with_defaults_and_names() -> None:
    robot = _Robot("\n")
    assert TerminalChannel().ask("Name?", None, "Bob", robot) == "Bob"
    assert robot.output.getvalue() == "\n[helper] Name?\n> [Bob] "
    robot = _Robot("\n", name="")
    assert TerminalChannel().ask("Sure?", None, "", robot) == ""
    assert robot.output.getvalue() == "\n[] Sure?\n> [] "  # Ruby's "" is truthy: both are shown


def test_terminal_puts_adds_no_second_newline_and_chomps_crlf() -> None:
    robot = _Robot("yes\r\n")
    assert TerminalChannel().ask("Continue?\n", ["a\n"], None, robot) == "yes"
    assert robot.output.getvalue() == "\n[helper] Continue?\n  1. a\n> "
    assert TerminalChannel().ask("?", None, None, _Robot("no\r")) == "no"
    assert TerminalChannel().ask("?", None, None, _Robot("last line")) == "last line"
    assert TerminalChannel().ask("?", None, None, _Robot("")) == ""  # end of input


def test_terminal_falls_back_to_stdio_and_takes_explicit_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("1\n"))
    stdout = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stdout)
    assert TerminalChannel().ask("Pick", ["only"]) == "only"
    assert stdout.getvalue() == "\n[Robot] Pick\n  1. only\n> "

    reader, writer = io.StringIO("mine\n"), io.StringIO()
    robot = _Robot("robot's\n")
    assert TerminalChannel(input=reader, output=writer).ask("Q", None, None, robot) == "mine"
    assert writer.getvalue() == "\n[helper] Q\n> "
    assert robot.output.getvalue() == ""


async def test_terminal_async_form() -> None:
    robot = _Robot("2\n")
    assert await TerminalChannel().aask("Which?", ["a", "b"], None, robot) == "b"
    assert isinstance(TerminalChannel(), AskChannel)


# ---- QueueChannel ------------------------------------------------------------------------------


class _Published:
    """Collects what a QueueChannel publishes and signals each question."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.asked = threading.Event()

    def __call__(self, kind: str, payload: dict[str, Any]) -> None:
        self.events.append((kind, payload))
        if kind == "hitl.requested":
            self.asked.set()

    def request_id(self) -> str:
        assert self.asked.wait(5)
        return str(self.events[0][1]["request_id"])


async def test_queue_question_is_published_and_answered_from_another_thread() -> None:
    published = _Published()
    channel = QueueChannel(published, timeout=5)
    task = asyncio.ensure_future(channel.aask("Which plan?", ["Basic", "Pro"], "Basic", _Robot()))
    request_id = await asyncio.to_thread(published.request_id)
    [pending] = channel.pending
    assert pending == AskRequest(request_id, "Which plan?", ("Basic", "Pro"), "Basic", "helper")
    answered = await asyncio.to_thread(channel.answer, request_id, "2")
    assert answered is True
    assert await asyncio.wait_for(task, 5) == "Pro"
    assert published.events == [
        (
            "hitl.requested",
            {
                "request_id": request_id,
                "question": "Which plan?",
                "choices": ["Basic", "Pro"],
                "default": "Basic",
                "robot": "helper",
            },
        ),
        ("hitl.resolved", {"request_id": request_id, "answer": "Pro", "status": "answered"}),
    ]
    assert channel.pending == []
    assert channel.answer(request_id, "again") is False
    assert channel.answer("unknown", "x") is False


async def test_queue_answer_may_come_from_the_publish_callback() -> None:
    channel = QueueChannel(timeout=5)
    channel.publish = lambda kind, data: kind == "hitl.requested" and channel.answer(data["request_id"], "")
    assert await channel.aask("Name?", None, "Ada") == "Ada"
    assert channel.pending == []


async def test_queue_timeout_is_a_tool_error_and_withdraws_the_question() -> None:
    published = _Published()
    channel = QueueChannel(published, timeout=0.05)
    with pytest.raises(ToolError, match=r"^No answer to 'Which plan\?' after 0.05 seconds$"):
        await channel.aask("Which plan?")
    request_id = published.request_id()
    assert published.events[-1] == (
        "hitl.resolved",
        {"request_id": request_id, "answer": None, "status": "timed_out"},
    )
    assert channel.pending == []
    assert channel.answer(request_id, "late") is False


def test_queue_sync_form_blocks_until_answered() -> None:
    published = _Published()
    channel = QueueChannel(published, timeout=None)
    result: list[str] = []
    asker = threading.Thread(target=lambda: result.append(channel.ask("Colour?", ["red", "blue"])))
    asker.start()
    assert channel.answer(published.request_id(), "blue")
    asker.join(5)
    assert result == ["blue"]
    with pytest.raises(ToolError, match=r"No answer to 'Again\?' after 0.01 seconds"):
        QueueChannel(timeout=0.01).ask("Again?")


async def test_queue_cancelled_wait_withdraws_the_question() -> None:
    published = _Published()
    channel = QueueChannel(published, timeout=None)
    task = asyncio.ensure_future(channel.aask("Still there?"))
    request_id = await asyncio.to_thread(published.request_id)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert published.events[-1] == (
        "hitl.resolved",
        {"request_id": request_id, "answer": None, "status": "cancelled"},
    )
    assert channel.pending == []


async def test_queue_publish_failure_withdraws_the_question() -> None:
    def broken(kind: str, payload: dict[str, Any]) -> None:
        raise RuntimeError("channel layer down")

    channel = QueueChannel(broken)
    with pytest.raises(RuntimeError, match="channel layer down"):
        await channel.aask("Hello?")
    assert channel.pending == []


def test_queue_answer_must_be_text() -> None:
    with pytest.raises(TypeError, match="answer must be str, got int"):
        QueueChannel().answer("id", 2)  # type: ignore[arg-type]
    assert isinstance(QueueChannel(), AskChannel)


class _SyncOnly:
    def ask(
        self,
        question: str,
        choices: Sequence[str] | None = None,
        default: str | None = None,
        robot: Any = None,
    ) -> str:
        return f"{question}|{choices}|{default}|{getattr(robot, 'name', None)}"


async def test_ask_via_uses_a_sync_only_channel_in_a_thread() -> None:
    assert await ask_via(_SyncOnly(), "Q", ["a"], "d", _Robot()) == "Q|['a']|d|helper"


# ---- AskUser -----------------------------------------------------------------------------------


def test_ask_user_uses_the_robots_channel_else_the_terminal() -> None:
    robot = _Robot("1\n")
    ask = AskUser(robot=robot)  # type: ignore[arg-type]
    assert isinstance(ask.channel, TerminalChannel)
    assert ask.call({"question": "Which?", "choices": ["x"]}) == "x"
    channel = QueueChannel()
    robot.ask_channel = channel  # type: ignore[attr-defined]
    assert ask.channel is channel
    assert isinstance(AskUser().channel, TerminalChannel)


async def test_ask_user_in_a_robot_run_answered_through_a_queue() -> None:
    llm = FakeLLM(
        [
            tool_call("robot_lab--ask_user", question="Which plan?", choices=["Basic", "Pro"]),
            text("You chose Pro."),
        ]
    )
    robot = robotlab.build(name="support", llm=llm, local_tools=[AskUser])
    channel = QueueChannel(timeout=5)

    def answer_later(kind: str, data: dict[str, Any]) -> None:  # as a web page would, from another thread
        if kind == "hitl.requested":
            threading.Thread(target=channel.answer, args=(data["request_id"], "2")).start()

    channel.publish = answer_later
    robot.ask_channel = channel  # type: ignore[attr-defined]
    result = await robot.arun("Upgrade me")
    assert result.reply == "You chose Pro."
    assert llm.requests[1].messages[-1]["role"] == "tool"
    assert llm.requests[1].messages[-1]["content"] == "Pro"


async def test_ask_user_timeout_reaches_the_model_as_the_tool_error() -> None:
    llm = FakeLLM([tool_call("robot_lab--ask_user", question="Which plan?"), text("No answer, moving on.")])
    robot = robotlab.build(name="support", llm=llm, local_tools=[AskUser])
    robot.ask_channel = QueueChannel(timeout=0.05)  # type: ignore[attr-defined]
    result = await robot.arun("Upgrade me")
    assert result.reply == "No answer, moving on."
    assert llm.requests[1].messages[-1]["content"] == (
        "Error (robot_lab--ask_user): No answer to 'Which plan?' after 0.05 seconds"
    )


async def test_ask_user_sends_hitl_events_into_the_runs_stream() -> None:
    llm = FakeLLM([tool_call("robot_lab--ask_user", question="Which plan?", choices=["Basic", "Pro"]),
                   text("You chose Pro.")])
    robot = robotlab.build(name="support", llm=llm, local_tools=[AskUser])
    published = _Published()
    channel = QueueChannel(published, timeout=5)
    robot.ask_channel = channel  # type: ignore[attr-defined]
    events: list[Any] = []
    answerers: list[threading.Thread] = []
    loop_thread = threading.get_ident()

    def on_event(event: Any) -> None:  # a page following the run answers what it sees, from another thread
        assert threading.get_ident() == loop_thread  # every event is sent on the run's own loop
        events.append(event)
        if event.kind == "hitl.requested":
            answerers.append(threading.Thread(target=channel.answer, args=(event.data["request_id"], "2")))
            answerers[-1].start()

    result = await robot.arun("Upgrade me", on_event=on_event, run_id="run-7")
    answerers[0].join(5)  # publish("hitl.resolved") runs on the answering thread
    assert result.reply == "You chose Pro."
    kinds = [e.kind for e in events]
    start = kinds.index("tool_call.started")
    assert kinds[start:start + 4] == ["tool_call.started", "hitl.requested", "hitl.resolved", "tool_call.completed"]
    requested, resolved = events[start + 1], events[start + 2]
    request_id = published.request_id()
    assert requested.data == {"request_id": request_id, "question": "Which plan?", "choices": ["Basic", "Pro"],
                              "default": None, "robot": "support"}
    assert resolved.data == {"request_id": request_id, "answer": "Pro", "status": "answered"}
    assert {e.run_id for e in events} == {"run-7"} and [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [kind for kind, _ in published.events] == ["hitl.requested", "hitl.resolved"]  # publish still gets both


async def test_hitl_events_of_a_timed_out_or_failed_question_close_in_the_stream() -> None:
    events: list[Any] = []
    llm = FakeLLM([tool_call("robot_lab--ask_user", question="Which plan?"), text("No answer.")])
    robot = robotlab.build(name="support", llm=llm, local_tools=[AskUser])
    robot.ask_channel = QueueChannel(timeout=0.01)  # type: ignore[attr-defined]
    await robot.arun("Upgrade me", on_event=events.append)
    hitl = [(e.kind, e.data.get("status")) for e in events if e.kind.startswith("hitl.")]
    assert hitl == [("hitl.requested", None), ("hitl.resolved", "timed_out")]

    def broken(kind: str, payload: dict[str, Any]) -> None:
        raise RuntimeError("channel layer down")

    events.clear()
    robot.ask_channel = QueueChannel(broken)  # type: ignore[attr-defined]
    llm.push(tool_call("robot_lab--ask_user", question="Which plan?"), text("Could not ask."))
    await robot.arun("Again", on_event=events.append)
    assert not [e for e in events if e.kind.startswith("hitl.")]  # never asked, so nothing to resolve
    completed = next(e for e in events if e.kind == "tool_call.completed")
    assert completed.data["is_error"] and "channel layer down" in completed.data["result"]


async def test_a_question_outside_a_listened_run_reaches_only_publish() -> None:
    published = _Published()
    channel = QueueChannel(published, timeout=5)
    channel.publish = lambda kind, data: (published(kind, data), kind == "hitl.requested"
                                          and channel.answer(data["request_id"], "ok"))
    assert await channel.aask("Fine?") == "ok"
    assert [kind for kind, _ in published.events] == ["hitl.requested", "hitl.resolved"]
