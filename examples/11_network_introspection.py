"""11 - Network introspection: look at a network before (and after) running it.

Shows ``execution_plan``, ``phases()``, ``to_mermaid()`` (paste it into any Mermaid viewer), ``to_dot()`` for
Graphviz, ``to_dict()``, looking robots up by task name, ``crew``, ``add_robot``, a task with its own
``RunConfig``, and ``broadcast``. It makes no LLM call.

Run it: ``python examples/11_network_introspection.py``.
"""

from __future__ import annotations

from _offline import llm

import robotlab
from robotlab.network import create_network


def bot(name: str, description: str) -> robotlab.Robot:
    return robotlab.build(name=name, description=description, system_prompt=f"You are the {name}.", llm=llm("OK."))


network = create_network(name="content_pipeline")
network.task("research", bot("researcher", "Finds sources"))
network.task("outline", bot("outliner", "Plans the article"), depends_on="research")
network.parallel("drafts", {"intro": bot("intro_writer", "Writes the intro"),
                            "body": bot("body_writer", "Writes the body")}, depends_on="outline")
network.task("edit", bot("editor", "Edits the drafts"), depends_on="drafts",
             config=robotlab.RunConfig(temperature=0.2, max_tool_rounds=3))
network.task("fact_check", bot("fact_checker", "Checks claims"), depends_on="optional")

print(network.execution_plan)
print(f"\nphases: {network.phases()}")
print(f"optional tasks: {network.optional_tasks}")
print(f"dependencies: {network.dependencies()}")
print(f"\nMermaid:\n{network.to_mermaid()}")
print(f"\nGraphviz:\n{network.to_dot()}")

print(f"\nnetwork['edit'] is the robot {network['edit'].name!r}; the crew: {[r.name for r in network.crew]}")
network.add_robot(bot("reviewer", "Reviews on request"))
print(f"after add_robot: {network.robot_count} robots, available: {[r.name for r in network.available_robots]}")
print(f"to_dict(): {network.to_dict()}")


@network.on_broadcast
def listener(envelope: dict) -> None:
    print(f"broadcast received: {envelope['payload']} from {envelope['network']}")


network.broadcast({"event": "deadline_moved", "to": "Friday"})
