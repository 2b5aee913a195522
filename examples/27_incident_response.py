"""27 - Incident response: a war room of robots investigating an outage in parallel.

Three SRE scouts (database, network, application) run as parallel tasks of a network. Each reports its
finding with a tool that writes it to the network's shared memory and sends a status message over the bus
to the war room. The war room's ``BusPoller`` hands it those messages one at a time, in arrival order. A
commander task starts with the scouts, blocks on memory until all three findings are in, then writes the
incident summary. A memory subscription prints each finding the moment it lands. The scouts' tasks carry
the poller group ``investigation`` and the commander's ``command``.

Run it: ``python examples/27_incident_response.py`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

import sys
from typing import Any

from _offline import llm

import robotlab
from robotlab.bus import MessageBus, RobotMessage
from robotlab.network import create_network
from robotlab.testing import tool_call

LAYERS = {
    "db": "Connection pool at 100%: a slow query on payments.transactions holds connections for 30s.",
    "net": "No packet loss between the load balancer and the payment pods; latency is normal.",
    "app": "payment-service threads block waiting for database connections; error rate 38%.",
}
INCIDENT = "INC-2042: payment-service returns HTTP 503 for 38% of checkouts since 14:05 UTC."


def say(line: str) -> None:
    sys.stdout.write(line + "\n")  # one write: robots run in parallel


class ReportFinding(robotlab.Tool):
    """Stores a scout's finding in shared memory and tells the war room."""

    description = "Report your finding to the war room."

    def execute(self, finding: str) -> str:
        """Report a finding.

        Args:
            finding: What you found, in one or two sentences.
        """
        assert self.robot is not None
        layer = self.robot.name.removesuffix("_scout")
        self.robot.run_memory.set(f"{layer}_finding", finding)
        self.robot.send_message(to="war_room", content={"layer": layer, "status": "finding reported"})
        return "reported"


class Commander(robotlab.Robot):
    """Waits for every finding in shared memory, then writes the summary."""

    async def call(self, result: Any) -> Any:
        findings = await network.memory.aget(*(f"{layer}_finding" for layer in LAYERS), wait=120)
        say("commander: all findings are in")
        notes = "\n".join(f"- {key}: {value}" for key, value in findings.items())
        return await super().call(result.continue_(f"{INCIDENT}\nFindings:\n{notes}\nWrite the summary."))


bus = MessageBus()
war_room = robotlab.build(name="war_room", bus=bus)


@war_room.on_message
def status_update(message: RobotMessage) -> None:
    say(f"war room <- {message.sender}: {message.content}")


network = create_network(name="war_room_network")
for layer, finding in LAYERS.items():
    scout = robotlab.build(
        name=f"{layer}_scout", bus=bus, local_tools=[ReportFinding],
        system_prompt=f"You are an SRE investigating the {layer} layer. Report one finding with report_finding.",
        llm=llm(tool_call("report_finding", finding=finding), "Finding reported."),
    )
    network.task(f"investigate_{layer}", scout, poller_group="investigation")
network.task("command", Commander(
    name="commander", system_prompt="You are the incident commander. Summarize the root cause and next step.",
    llm=llm("Root cause: a slow query on payments.transactions exhausted the DB pool. "
            "Next: kill the query, add an index, and raise the pool alert threshold."),
), poller_group="command")

network.memory.subscribe(*(f"{layer}_finding" for layer in LAYERS),
                         callback=lambda change: say(f"memory: {change.key} written by {change.writer}"))
print(f"poller groups: {network.bus_poller.groups}")
print(INCIDENT)
result = network.run(INCIDENT)
print(f"summary: {result.value.reply}")
print(f"findings in memory: {sorted(network.memory.keys())}")
