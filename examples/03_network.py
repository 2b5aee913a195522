"""03 - A network: a classifier routes each request to a specialist.

Shows ``create_network``, tasks, optional tasks activated by a routing robot (a ``Robot`` subclass whose
``call`` step runs the robot and then ``activate``s the branch it chose), and the ``FlowResult`` a network
run returns. Only the chosen specialist runs.

Run it: ``python examples/03_network.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from typing import Any

from _offline import llm

import robotlab
from robotlab.network import create_network


class Classifier(robotlab.Robot):
    """Answers with one category, then hands the customer's message to that specialist."""

    async def call(self, result: Any) -> Any:
        routed = await super().call(result)
        words = str(routed.value.reply).strip().lower().split()
        category = next((w.strip(".") for w in words if w.strip(".") in {"billing", "technical"}), "general")
        return routed.continue_(result.context["run_params"]["message"]).activate(category)


def specialist(name: str, focus: str, reply: str) -> robotlab.Robot:
    return robotlab.build(name=name, system_prompt=f"You are a {focus} specialist. Answer briefly.", llm=llm(reply))


REQUESTS = {
    "I was charged twice for my subscription this month.": "billing",
    "The app crashes every time I open the settings page.": "technical",
}

for message, scripted in REQUESTS.items():
    network = create_network(name="support")
    network.task("classifier", Classifier(
        name="classifier",
        system_prompt="Classify the request. Answer with exactly one word: billing, technical or general.",
        llm=llm(scripted),
    ))
    network.task("billing", specialist("billing_agent", "billing",
                                       "I have refunded the duplicate charge."), depends_on="optional")
    network.task("technical", specialist("tech_agent", "technical",
                                         "Please update to version 2.4.1, which fixes that crash."),
                 depends_on="optional")
    network.task("general", specialist("general_agent", "customer service", "Happy to help!"),
                 depends_on="optional")

    result = network.run(message)
    print(f"customer: {message}")
    print(f"  routed to: {', '.join(result.activated_steps)}")
    print(f"  {result.value.robot_name}: {result.value.reply}")
