"""07 - Network memory: robots running in parallel share what they find.

Three analysts (sentiment, entities, keywords) run at the same time, each writing its finding to the
network's shared memory with a tool. A synthesizer starts with them, waits on memory until all three
findings are there (``await memory.aget(..., wait=...)``), and combines them. A subscription prints each
write as it happens (with the robot that wrote it), and ``network.broadcast`` tells every listener the
analysis is done.

Run it: ``python examples/07_network_memory.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import sys
from typing import Any

from _offline import llm

import robotlab
from robotlab.network import create_network
from robotlab.testing import tool_call

FINDINGS = ("sentiment", "entities", "keywords")
REVIEW = ("The new Aurora X2 headphones from Northwind sound wonderful and the battery lasts two days, "
          "but the case feels cheap.")


class RecordFinding(robotlab.Tool):
    """Writes the robot's finding to the shared memory under the robot's name."""

    description = "Record your finding in the team's shared memory."

    def execute(self, finding: str) -> str:
        """Record a finding.

        Args:
            finding: What you found, in one short sentence.
        """
        assert self.robot is not None
        self.robot.run_memory.set(self.robot.name, finding)
        return "recorded"


def analyst(focus: str, finding: str) -> robotlab.Robot:
    return robotlab.build(
        name=focus,
        system_prompt=f"Analyse the {focus} of the text, then record it with record_finding in one sentence.",
        local_tools=[RecordFinding],
        llm=llm(tool_call("record_finding", finding=finding), "Recorded."),
    )


class Synthesizer(robotlab.Robot):
    """Waits for every finding in the shared memory, then writes the summary."""

    async def call(self, result: Any) -> Any:
        findings = await network.memory.aget(*FINDINGS, wait=60)
        notes = "\n".join(f"{key}: {value}" for key, value in findings.items())
        return await super().call(result.continue_(f"Combine these findings into one sentence:\n{notes}"))


network = create_network(name="review_analysis")
network.task("sentiment", analyst("sentiment", "Mostly positive, with one complaint about the case."))
network.task("entities", analyst("entities", "Product: Aurora X2 headphones; company: Northwind."))
network.task("keywords", analyst("keywords", "sound, battery life, case quality."))
network.task("synthesis", Synthesizer(
    name="synthesizer",
    system_prompt="You combine analysts' findings.",
    llm=llm("Northwind's Aurora X2 headphones win praise for sound and battery life, but the case feels cheap."),
))


@network.memory.subscriber(*FINDINGS)
def show(change: robotlab.MemoryChange) -> None:
    sys.stdout.write(f"  memory: {change.writer} wrote {change.key!r}\n")  # one write: robots run in parallel


@network.on_broadcast
def done(envelope: dict) -> None:
    print(f"  broadcast from {envelope['network']}: {envelope['payload']}")


print("running the analysts and the synthesizer in parallel")
result = network.run(REVIEW)
network.broadcast({"event": "analysis_complete", "findings": sorted(network.memory.keys())})

for key in FINDINGS:
    print(f"{key}: {network.memory.get(key)}")
print(f"synthesis: {result.value.reply}")
