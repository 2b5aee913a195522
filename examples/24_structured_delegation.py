"""24 - Structured delegation: a manager hands sub-tasks to other robots.

``manager.delegate(to=robot, task=...)`` runs another robot on the manager's behalf and returns its
``RobotResult`` with ``delegated_by`` and ``duration`` filled in (and its token counts). With
``async_=True`` it returns a ``DelegationFuture`` at once, so several delegations run in parallel and the
manager collects them with ``value(timeout=...)``.

Offline the scripted model answers at once, so the two wall times only differ with a real model.

When to use what: ``delegate`` for a sub-task whose answer you need now; the message bus (examples 12-14)
for robots that talk back and forth; a network (examples 03, 07) for a fixed graph of steps.

Run it: ``python examples/24_structured_delegation.py`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

import time

from _offline import llm

import robotlab

REPORT = ("Q3: revenue 4.2M EUR (+12% on Q2), churn 3.1% (from 4.0%), two enterprise customers signed, "
          "support backlog grew to 140 tickets.")

manager = robotlab.build(name="manager", system_prompt="You run the quarterly review.", llm=llm("Thanks."))
summarizer = robotlab.build(name="summarizer", system_prompt="Summarize in one sentence.",
                            llm=llm("Revenue grew 12% to 4.2M EUR while churn fell to 3.1%."))
analyst = robotlab.build(name="analyst", system_prompt="Name the biggest risk in one sentence.",
                         llm=llm("The growing support backlog (140 tickets) threatens the churn gains."))


def show(result: robotlab.RobotResult) -> None:
    print(f"  {result.robot_name:<10} (delegated by {result.delegated_by}, {result.duration:.3f}s, "
          f"{result.input_tokens}+{result.output_tokens} tokens): {result.reply}")


print("synchronous: one after the other")
started = time.perf_counter()
for robot in (summarizer, analyst):
    show(manager.delegate(to=robot, task=f"The report: {REPORT}"))
print(f"  wall time {time.perf_counter() - started:.3f}s")

print("asynchronous: fan out, then collect")
started = time.perf_counter()
futures = [manager.delegate(to=robot, task=f"Again, briefly: {REPORT}", async_=True) for robot in (summarizer, analyst)]
for future in futures:
    show(future.value(timeout=120))
print(f"  wall time {time.perf_counter() - started:.3f}s; all resolved: {all(f.is_resolved for f in futures)}")
