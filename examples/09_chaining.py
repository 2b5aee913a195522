"""09 - Chaining and reconfiguration: change a robot step by step, and see what changed.

Shows the ``with_*`` methods, which each change one thing and return the robot so calls chain
(``with_model``, ``with_temperature``, ``with_instructions``, ``with_tools``, ``with_params``,
``with_schema``), ``update(...)`` for several settings at once, ``to_dict()`` to describe the robot, and a
diff of the configuration between steps. It ends with one run of the structured-output robot.

Run it: ``python examples/09_chaining.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from typing import Any

from _offline import llm
from pydantic import BaseModel

import robotlab


@robotlab.tool
def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


class Tagline(BaseModel):
    product: str
    tagline: str


def diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    changed = [f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in sorted({*before, *after})
               if before.get(k) != after.get(k)]
    return "; ".join(changed) or "no change"


robot = robotlab.build(name="copywriter", system_prompt="You write product copy.",
                       llm=llm('{"product": "Aurora X2", "tagline": "Hear every detail, all weekend long."}'))
configured = robot.model or "openai/gpt-4o-mini"  # the configured model, when there is one
steps = [
    ("with_temperature(0.9)", lambda r: r.with_temperature(0.9)),
    ("with_model(...)", lambda r: r.with_model("anthropic/claude-sonnet-4-20250514")),
    ("with_tools(word_count)", lambda r: r.with_tools(word_count)),
    ("update(model, temperature)", lambda r: r.update(model=configured, temperature=0.2)),
]
for label, change in steps:
    before = {**robot.effective_config, "tools": [t.name for t in robot.local_tools]}
    change(robot)
    after = {**robot.effective_config, "tools": [t.name for t in robot.local_tools]}
    print(f"{label:<28} {diff(before, after)}")

robot.with_instructions("Answer with a product name and a tagline as JSON.", replace=False).with_schema(Tagline)
print(f"instructions now: {robot.instructions!r}")
print(f"to_dict(): {robot.to_dict()}")

tagline = Tagline.model_validate_json(robot.run("A tagline for the Aurora X2 headphones, please.").reply)
print(f"structured reply: product={tagline.product!r} tagline={tagline.tagline!r}")
