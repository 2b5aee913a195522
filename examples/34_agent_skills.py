"""34 - Agent Skills: a SKILL.md bundle matched to each request, with a script the model can run.

A skill is a folder with a ``SKILL.md`` (front matter ``name``, ``description`` and capabilities such as
``timeout``; the body is instructions) and a ``scripts/`` folder. ``AgentSkillCatalog`` scans the skills
root (``skills_path``) once; a robot built with ``skills=["check_style"]`` compares each run's message with
the skill's description and, when they are similar enough (0.70), puts the skill's instructions before its
own and offers each executable script as a tool, for that run only. A bad bundle, and a script that is not
executable, are skipped with a warning.

The bundles are written to a temporary folder; the script is a small ``bash`` line counter.

Run it: ``python examples/34_agent_skills.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from _offline import llm

import robotlab
from robotlab.hooks import Hook
from robotlab.testing import tool_call

logging.basicConfig(stream=sys.stdout, format="warning: %(message)s", level=logging.WARNING)

root = Path(tempfile.mkdtemp(prefix="robotlab_skills_"))
style = root / "style-bundle"
(style / "scripts").mkdir(parents=True)
(style / "SKILL.md").write_text("""---
name: check_style
description: Reviews Python code for PEP 8 style problems
timeout: 10
---
Run long_lines on the file first, then point out each style problem with its line number.
""")
script = style / "scripts" / "long-lines.sh"
script.write_text('# Counts the lines over 79 characters in a file\n'
                  'awk \'length > 79 {n++} END {print FILENAME ": " n+0 " line(s) over 79 characters"}\' "$1"\n')
script.chmod(0o755)
(style / "scripts" / "notes.sh").write_text("# Not executable, so never offered\necho hi\n")
(root / "broken").mkdir()
(root / "broken" / "SKILL.md").write_text("---\nname: broken\n---\nA bundle without a description.\n")

sample = root / "app.py"
sample.write_text("import os\n" + "x = " + " + ".join(["1"] * 40) + "\n" + "def f(): return os.getcwd()\n")

robotlab.configure(skills_path=str(root))
robotlab.AgentSkillCatalog.reset()  # the shared catalog rescans the new root
print(f"catalog: {[skill.name for skill in robotlab.AgentSkillCatalog.instance().all()]}")


class ShowRequest(Hook):
    """Prints what the model is given for each run."""

    def before_llm_generation(cls, ctx: Any) -> None:
        print(f"  instructions: {ctx.robot.instructions!r}")
        print(f"  tools: {[tool.name for tool in ctx.robot.local_tools]}")


reviewer = robotlab.build(
    name="reviewer", system_prompt="You are a careful code reviewer.", skills=["check_style"],
    llm=llm(tool_call("long_lines", args=str(sample)),
            "Line 2 is over 79 characters; split the sum. Also put f's body on its own line.",
            "Tomorrow looks sunny in Paris."),
)
reviewer.on(ShowRequest)
print(f"pending skills: {[skill.name for skill in reviewer.agent_skills]}")

for message in (f"Please review my Python code for PEP 8 style problems: {sample}",
                "What is the weather in Paris tomorrow?"):
    print(f"user: {message}")
    result = reviewer.run(message)
    for tool_result in result.tool_calls:
        print(f"  {tool_result.tool.name} -> {str(tool_result.data).strip()}")
    print(f"  reviewer: {result.reply}")
print(f"after the runs: instructions={reviewer.instructions!r}, tools={reviewer.local_tools}")
