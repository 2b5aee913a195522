"""Networks for the distributed tests and benchmark (a 1 -> n -> 1 fan-out; a relay through the turn's shared
memory), and an LLM that talks to a fake server.

Worker processes get them through the environment: ``ROBOTLAB_TEST_NETWORKS='{"fanout":
"tests.robotlab_django.fanout.fanout_network", ...}'``, ``ROBOTLAB_TEST_LLM=tests.robotlab_django.fanout.server_llm``
and ``ROBOTLAB_TEST_LLM_BASE=<the fake OpenAI-compatible server's base URL>``; ``ROBOTLAB_TEST_FANOUT`` sets
how many branches (4 by default); ``ROBOTLAB_TEST_REDUCER=instant`` makes ``reduce`` answer without a model
call (a :class:`~robotlab.testing.FakeLLM`, so the critical path is plan -> branch: the B3 benchmark's 2 L);
``ROBOTLAB_TEST_LLM=tests.robotlab_django.fanout.direct_llm`` talks to the server without litellm, and
``...fanout.auto_llm`` through RobotLab's default transport.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

import robotlab
from robotlab.llm import AutoLLM, LLMClient
from robotlab.tools import Tool

__all__ = ["BUDGET_ENV", "MAX_TOKENS_ENV", "NOTES_ENV", "AwaitSignal", "SendSignal", "auto_llm", "branch_count",
           "direct_llm", "fanout_network", "note", "relay_network", "server_llm", "system_prompt"]

#: A file every :func:`note` call appends a line to, when set (so a test counts the tool's runs).
NOTES_ENV = "ROBOTLAB_TEST_NOTES"
#: The ``fanout`` network's ``token_budget``, and its robots' ``max_tokens``, when set (the budget scenarios).
BUDGET_ENV, MAX_TOKENS_ENV = "ROBOTLAB_TEST_FANOUT_BUDGET", "ROBOTLAB_TEST_MAX_TOKENS"

MODEL = "openai/gpt-4o-mini"


def branch_count() -> int:
    """The number of parallel branches (``ROBOTLAB_TEST_FANOUT``, default 4)."""
    return int(os.environ.get("ROBOTLAB_TEST_FANOUT", "4"))


def system_prompt(task: str) -> str:
    """The system prompt of ``task``'s robot (the fake server's responder tells the robots apart by it)."""
    return f"You are the {task} robot."


def server_llm() -> LLMClient:
    """An LLM client for the fake OpenAI-compatible server at ``ROBOTLAB_TEST_LLM_BASE``, no retries."""
    return LLMClient(api_base=os.environ["ROBOTLAB_TEST_LLM_BASE"], api_key="sk-fake", num_retries=0)


@functools.cache
def direct_llm() -> robotlab.OpenAICompatibleLLM:
    """A plain-httpx client for the fake server at ``ROBOTLAB_TEST_LLM_BASE`` (no litellm), no retries.

    One per process, as an application would hold it: its connection pool then outlives a job.
    """
    return robotlab.OpenAICompatibleLLM(api_base=os.environ["ROBOTLAB_TEST_LLM_BASE"], api_key="sk-fake",
                                        num_retries=0)


def auto_llm() -> AutoLLM:
    """RobotLab's default transport (what the app builds from ``ROBOTLAB["API_BASE"]``) for the fake server."""
    return AutoLLM(api_base=os.environ["ROBOTLAB_TEST_LLM_BASE"], api_key="sk-fake", num_retries=0)


def note(text: str) -> str:
    """Write a note down (the branches' tool).

    Args:
        text: What to note.
    """
    _record(text)
    return f"noted {text}"


def fanout_network(**options: Any) -> robotlab.Network:
    """``plan`` -> ``branch_1`` ... ``branch_<n>`` -> ``reduce``; ``options`` (``llm=``) go to every robot, and
    the branches have the :func:`note` tool."""
    budget = os.environ.get(BUDGET_ENV)
    network = robotlab.create_network(name="fanout", config={"token_budget": int(budget)} if budget else None)
    max_tokens = os.environ.get(MAX_TOKENS_ENV)
    if max_tokens:
        options = {"max_tokens": int(max_tokens), **options}

    def robot(task: str, tools: list[Any] | None = None) -> robotlab.Robot:
        return robotlab.build(name=f"{task}_bot", system_prompt=system_prompt(task), model=MODEL,
                              local_tools=tools or [], **options)

    network.task("plan", robot("plan"))
    branches = [f"branch_{i}" for i in range(1, branch_count() + 1)]
    for name in branches:
        network.task(name, robot(name, [note]), depends_on="plan")
    if os.environ.get("ROBOTLAB_TEST_REDUCER") == "instant":
        from robotlab.testing import FakeLLM

        reducer = robotlab.build(name="reduce_bot", system_prompt=system_prompt("reduce"), model=MODEL,
                                 **{**options, "llm": FakeLLM(default="Done.")})
        network.task("reduce", reducer, depends_on=branches)
    else:
        network.task("reduce", robot("reduce"), depends_on=branches)
    return network


class AwaitSignal(Tool):
    """Say the task is waiting, then wait for the signal another task sets (the relay network's waiter)."""

    description = "Wait for the signal."

    def execute(self) -> str:
        assert self.robot is not None
        memory = self.robot.run_memory
        memory.set("waiting", os.getpid())
        sent = memory.get("signal", wait=30)
        woke = time.time()
        _record(f"woke {woke!r} sent {sent!r}")
        return f"signal after {woke - float(sent):.4f} s"


class SendSignal(Tool):
    """Wait until the other task waits, then set the signal to the time it is set (the relay network's setter)."""

    description = "Send the signal."

    def execute(self) -> str:
        assert self.robot is not None
        memory = self.robot.run_memory
        memory.get("waiting", wait=30)
        memory.set("signal", time.time())
        return "sent"


def _record(line: str) -> None:
    path = os.environ.get(NOTES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as notes:
            notes.write(f"{os.getpid()} {line}\n")


def relay_network(**options: Any) -> robotlab.Network:
    """``waiter`` and ``setter`` (roots, so they start together, on different workers), then ``done``: the
    waiter's tool waits on the turn's memory for the key the setter's tool sets."""
    network = robotlab.create_network(name="relay")
    for task, tool in (("waiter", AwaitSignal), ("setter", SendSignal)):
        network.task(task, robotlab.build(name=f"{task}_bot", system_prompt=system_prompt(task), model=MODEL,
                                          local_tools=[tool], **options))
    network.task("done", robotlab.build(name="done_bot", system_prompt=system_prompt("done"), model=MODEL,
                                        **options), depends_on=["waiter", "setter"])
    return network
