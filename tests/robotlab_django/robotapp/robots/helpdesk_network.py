"""The network the test suite runs: ``helpdesk``, a classifier routing to billing, technical or general.

The router takes the classifier's reply as the task to activate, so a scripted model picks the branch.
"""

from __future__ import annotations

from typing import Any

import robotlab
from robotlab_django.registry import register_network

#: The optional specialists, by task name.
SPECIALISTS = ("billing", "technical", "general")


def route(result: Any) -> str | None:
    """The task the classifier named (its reply, stripped and lower-cased)."""
    if "classifier" not in result.context:
        return None
    return str(result.context["classifier"].reply or "").strip().lower() or None


@register_network(name="helpdesk", description="Routes <your> question to a specialist")
def helpdesk_network(**options: Any) -> robotlab.Network:
    """A fresh helpdesk network; ``options`` (``llm=``) go to every robot."""
    network = robotlab.create_network(name="helpdesk", router=route)
    network.task("classifier", robotlab.build(name="classifier", system_prompt="Answer with one word: billing, "
                                              "technical or general.", **options))
    for name in SPECIALISTS:
        network.task(name, robotlab.build(name=f"{name}_agent", system_prompt=f"You are the {name} specialist.",
                                          **options), depends_on="optional")
    return network
