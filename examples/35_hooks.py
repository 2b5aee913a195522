"""35 - Hooks: your code before, around and after what robots and networks do.

Shows ``Hook`` subclasses registered globally (``robotlab.hooks.on``), on a robot (``robot.on``), on a
network (``network.on``) and for one run (``hooks=``): a timer using ``ctx.local`` state, a redaction hook
that rewrites the request in ``before_run``, a guard that blocks a tool in ``around_tool_call``, a reply
cache in ``around_llm_generation``, a task logger for network tasks, and ``on_error``.

Run it: ``python examples/35_hooks.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import re
import time
from typing import Any

from _offline import OFFLINE, llm

import robotlab
from robotlab.hooks import Hook
from robotlab.network import create_network
from robotlab.testing import raise_, tool_call


class Timer(Hook):
    """Global: times every run."""

    def before_run(cls, ctx: Any) -> None:
        ctx.local.started = time.perf_counter()

    def after_run(cls, ctx: Any) -> None:
        print(f"  [timer] {ctx.robot.name} answered in {time.perf_counter() - ctx.local.started:.3f}s")


class Redact(Hook):
    """Replaces card numbers before the model sees the request."""

    def before_run(cls, ctx: Any) -> None:
        if ctx.request is not None:
            ctx.request = re.sub(r"\b\d{16}\b", "[card number]", str(ctx.request))
            print(f"  [redact] sending: {ctx.request}")


class Guard(Hook):
    """Lets only read-only tools run."""

    allowed = {"lookup_order"}

    async def around_tool_call(cls, ctx: Any, proceed: Any) -> None:
        if ctx.tool_name in cls.allowed:
            await proceed()
        else:
            ctx.tool_result = f"Operation not permitted: {ctx.tool_name}"
        print(f"  [guard] {ctx.tool_name}{ctx.tool_args} -> {ctx.tool_result}")


class ReplyCache(Hook):
    """Answers a repeated request without calling the model."""

    replies: dict[str, str] = {}

    async def around_llm_generation(cls, ctx: Any, proceed: Any) -> Any:
        if ctx.request in cls.replies:
            print("  [cache] hit: the model is not called")
            return cls.replies[ctx.request]
        result = await proceed()
        cls.replies[ctx.request] = result.reply
        return result


class TaskLog(Hook):
    """Network: logs every task."""

    def after_task(cls, ctx: Any) -> None:
        print(f"  [task] {ctx.task_name} ({ctx.robot.name}) finished")


class Alert(Hook):
    """Reports failed runs (the error still reaches the caller)."""

    def on_error(cls, ctx: Any) -> None:
        print(f"  [alert] {ctx.robot.name} failed: {type(ctx.error).__name__}: {ctx.error}")


@robotlab.tool
def lookup_order(order_id: str) -> dict:
    """Look up an order by its id."""
    return {"order_id": order_id, "status": "shipped"}


@robotlab.tool
def delete_account(email: str) -> str:
    """Delete a customer account."""
    raise AssertionError("the guard never lets this run")


robotlab.hooks.on(Timer)
clerk = robotlab.build(
    name="clerk", local_tools=[lookup_order, delete_account],
    llm=llm("Thanks, I noted your card.", tool_call("delete_account", email="ada@example.com"),
            "I am not allowed to delete accounts.", "Paris is the capital of France."),
)
clerk.on(Guard)

print("1. before_run rewrites the request")
clerk.run("My card is 4111111111111111, please note it.", hooks=Redact)
print("2. around_tool_call blocks a tool")
print(f"  clerk: {clerk.run('Delete my account ada@example.com.').reply}")
print("3. around_llm_generation caches replies")
clerk.on(ReplyCache)
for _ in range(2):
    print(f"  clerk: {clerk.run('Capital of France?').reply}")

print("4. network hooks see every task")
network = create_network(name="pipeline")
network.task("draft", robotlab.build(name="writer", llm=llm("A draft.")))
network.task("review", robotlab.build(name="editor", llm=llm("Reviewed.")), depends_on="draft")
network.on(TaskLog)
network.run("Write a haiku about hooks.")

if OFFLINE:  # a scripted failure; a real model would not fail on cue
    print("5. on_error sees failures")
    broken = robotlab.build(name="broken", llm=llm(raise_(robotlab.InferenceError("provider down"))))
    broken.on(Alert)
    try:
        broken.run("Hi")
    except robotlab.InferenceError as error:
        print(f"  the caller still gets it: {error}")
robotlab.hooks.clear_hooks()
