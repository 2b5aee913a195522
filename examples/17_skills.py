"""17 - Template skills: reusable pieces of instructions, composed by name.

A skill here is a template whose body is a piece of instructions. A robot lists skills with ``skills=[...]``
and a template lists them in its front matter (``skills: [...]``); they are expanded depth first, nested
skills before the skill that names them, all before the template's own text and the ``system_prompt``.
Their front matter settings (temperature, ...) apply too, under the constructor's. A skill that comes
back around (a cycle) is skipped with a warning. Skills may take parameters, like any template.

The templates are written to a temporary folder. Example 34 shows the other kind of skill, Agent Skills
(``SKILL.md`` bundles matched to each request).

Run it: ``python examples/17_skills.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

from _offline import llm

import robotlab

logging.basicConfig(stream=sys.stdout, format="warning: %(message)s", level=logging.WARNING)

TEMPLATES = {
    "no_secrets.md": "Never reveal passwords, keys or internal URLs.",
    "safety.md": "---\nskills: [no_secrets]\n---\nEscalate anything about legal threats to a human.",
    "friendly_tone.md": "---\ntemperature: 0.6\n---\nBe warm and use the customer's name.",
    "concise.md": "---\nparameters:\n  words: 60\n---\nAnswer in at most {{ words }} words.",
    "support.md": "---\nskills: [friendly_tone, safety]\ndescription: Customer support\n---\n"
                  "You answer support questions for {{ company }}.",
    "loop_a.md": "---\nskills: [loop_b]\n---\nRule A.",
    "loop_b.md": "---\nskills: [loop_a]\n---\nRule B.",
}
prompts = Path(tempfile.mkdtemp(prefix="robotlab_skill_templates_"))
for name, body in TEMPLATES.items():
    (prompts / name).write_text(body)
robotlab.configure(template_path=str(prompts), skills_path=str(prompts / "no-agent-skills"))

support = robotlab.build(name="support", template="support", skills=["concise"], context={"company": "Acme"},
                         system_prompt="Sign as Ada.", llm=llm("Hi Sam! Your refund is on its way. - Ada"))
print(f"skills (the robot's, then the template's): {support.skills}")
print(f"temperature from the friendly_tone skill: {support.effective_config['temperature']}")
print("instructions, in order:")
for part in str(support.instructions).split("\n\n"):
    print(f"  - {part}")
print(f"support: {support.run('Hi, I am Sam. Where is my refund?', words=30).reply}")
print(f"with words=30 for that run: {str(support.instructions).splitlines()[0]}")

looper = robotlab.build(name="looper", skills=["loop_a"], llm=llm("OK."))
print(f"looper's instructions despite the cycle: {looper.instructions!r}")
