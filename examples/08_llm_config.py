"""08 - LLM configuration: where each setting comes from.

Walks through the layers, each overriding the one before: built-in defaults, the user file
(``$XDG_CONFIG_HOME/robotlab/robotlab.yml``), the project file (``config/robotlab.yml``), ``ROBOT_LAB_``
environment variables, ``robotlab.configure(...)``; then, for one robot, a template's front matter, a shared
``RunConfig``, the constructor's options and ``with_*`` calls. It makes no LLM call.

The config files are written to a temporary folder (the example changes into it), so nothing of yours is
read or changed.

Run it: ``python examples/08_llm_config.py``.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import robotlab


def show(step: str) -> None:
    config = robotlab.reload_config()
    print(f"{step:<26} max_tool_rounds={config.max_tool_rounds!s:<5} "
          f"request_timeout={config.llm.request_timeout:<6} template_path={config.template_path}")


work = Path(tempfile.mkdtemp(prefix="robotlab_config_"))
os.chdir(work)
os.environ["XDG_CONFIG_HOME"] = str(work / "xdg")
for name in ("ROBOT_LAB_MAX_TOOL_ROUNDS", "ROBOT_LAB_LLM__REQUEST_TIMEOUT", "ROBOT_LAB_TEMPLATE_PATH"):
    os.environ.pop(name, None)

show("1. built-in defaults")

user_file = work / "xdg" / "robotlab" / "robotlab.yml"
user_file.parent.mkdir(parents=True)
user_file.write_text("max_tool_rounds: 5\nllm:\n  request_timeout: 90\n")
show("2. user file")

(work / "config").mkdir()
(work / "config" / "robotlab.yml").write_text(
    "defaults:\n  max_tool_rounds: 8\n  template_path: prompts\nproduction:\n  max_tool_rounds: 20\n"
)
show("3. project file")
os.environ["ROBOT_LAB_ENV"] = "production"
show("   ... in production")
del os.environ["ROBOT_LAB_ENV"]

os.environ["ROBOT_LAB_LLM__REQUEST_TIMEOUT"] = "45"
show("4. environment variable")

robotlab.configure(max_tool_rounds=12)
config = robotlab.get_config()
print(f"{'5. configure(...)':<26} max_tool_rounds={config.max_tool_rounds!s:<5} "
      f"request_timeout={config.llm.request_timeout:<6} template_path={config.template_path}")

print("\nand for one robot:")
(work / "prompts").mkdir()
(work / "prompts" / "writer.md").write_text("---\nmodel: openai/gpt-4o-mini\ntemperature: 0.4\nmax_tokens: 300\n---\n"
                                            "You write product copy.\n")
from_template = robotlab.build(name="writer", template="writer")
print(f"6. template front matter   {from_template.effective_config}")

house_style = robotlab.RunConfig(temperature=0.6, max_tool_rounds=4)
with_config = robotlab.build(name="writer", template="writer", config=house_style)
print(f"7. a shared RunConfig      {with_config.effective_config}")

explicit = robotlab.build(name="writer", template="writer", config=house_style, temperature=0.9,
                          model="anthropic/claude-sonnet-4-20250514")
print(f"8. constructor options     {explicit.effective_config}")

explicit.with_temperature(0.1).with_params(max_tokens=120)
print(f"9. with_* calls            {explicit.effective_config}")
