"""31 - Launch assessment: six analysts in parallel, at most four at a time.

Six specialist robots review a product brief as parallel tasks of one network. The network's
``RunConfig(max_concurrent_robots=4)`` caps how many run at once: the fifth and sixth wait for a free slot.
Each analyst writes its verdict to shared memory; the launch director reads all six and makes the GO /
NO-GO call.

Offline the scripted model answers at once, so each analyst also waits a quarter of a second, as a model
call would, to make the queueing visible.

Run it: ``python examples/31_launch_assessment.py`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from _offline import OFFLINE, llm

import robotlab
from robotlab.network import create_network

BRIEF = ("Product: Orion, an AI project-management tool that plans sprints from Jira backlogs. $25/seat/month. "
         "Beta: 12 paying customers, 94% satisfaction, no critical bugs. SOC 2 Type I due in 30 days.")
ANALYSTS = {
    "market": ("market opportunity analyst", "Mid-size engineering teams want this. READY"),
    "competitive": ("competitive intelligence analyst", "Differentiated by scope-creep detection. READY"),
    "tech": ("technical readiness reviewer", "Zero critical bugs in beta. READY"),
    "risk": ("product risk assessor", "SOC 2 lands after launch; enterprise deals may stall. NOT-READY"),
    "financial": ("pricing analyst", "Price matches the segment. READY"),
    "legal": ("legal and compliance reviewer", "Terms are fine; disclose the SOC 2 timeline. READY"),
}
started = time.perf_counter()
running = 0
peak = 0


def say(line: str) -> None:
    sys.stdout.write(f"  +{time.perf_counter() - started:.2f}s {line}\n")


class Analyst(robotlab.Robot):
    """Reviews the brief and stores its verdict under its name."""

    async def call(self, result: Any) -> Any:
        global running, peak
        running += 1
        peak = max(peak, running)
        say(f"{self.name} started ({running} running)")
        if OFFLINE:
            await asyncio.sleep(0.25)
        reviewed = await super().call(result)
        network.memory.set(self.name, str(reviewed.value.reply))
        running -= 1
        say(f"{self.name} finished: {str(reviewed.value.reply).split()[-1]}")
        return reviewed


class Director(robotlab.Robot):
    """Makes the call from every verdict in shared memory."""

    async def call(self, result: Any) -> Any:
        verdicts = await network.memory.aget(*ANALYSTS, wait=120)
        notes = "\n".join(f"{name}: {verdict}" for name, verdict in verdicts.items())
        return await super().call(result.continue_(f"Verdicts:\n{notes}\nStart with GO - or NO-GO -."))


network = create_network(name="launch_assessment", config=robotlab.RunConfig(max_concurrent_robots=4))
for name, (role, verdict) in ANALYSTS.items():
    network.task(name, Analyst(name=name, llm=llm(verdict), system_prompt=(
        f"You are a {role}. Review the brief in two sentences and end with READY or NOT-READY.")))
network.task("decide", Director(
    name="director", system_prompt="You are the VP of Product making the launch call.",
    llm=llm("GO - five of six analysts are ready; announce SOC 2 timing up front to unblock enterprise deals."),
), depends_on=list(ANALYSTS))

print(f"max_concurrent_robots={network.config.max_concurrent_robots}")
result = network.run(BRIEF)
print(f"most analysts running at once: {peak}")
print(f"recommendation: {result.value.reply}")
