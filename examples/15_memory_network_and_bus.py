"""15 - Memory, a network and the bus together: an editorial pipeline that writes an article.

Three writers draft the Linux, macOS and Windows sections of an article in parallel (a network); each
stores its draft in the network's shared memory and a combiner, waiting on memory for all three, joins
them. The editor-in-chief then sends the combined article over the message bus to an editor for revisions,
until the editor answers APPROVED or two revisions are done. Every stage is saved as a Markdown file, and
the shared memory as ``memory.json``.

The files go to the folder given as the first argument (a temporary folder by default), never the repo.

Run it: ``python examples/15_memory_network_and_bus.py [output_dir]`` (offline unless a model is
configured, see ``_offline.py``).
"""

from __future__ import annotations

import sys
from typing import Any

from _offline import llm, output_dir

import robotlab
from robotlab.bus import MessageBus
from robotlab.network import create_network

out = output_dir(sys.argv, "editorial")
SECTIONS = {
    "linux": "Linux: install the package from your distribution and enable the service with systemd.",
    "mac": "macOS: install with Homebrew and start it at login with `brew services start`.",
    "windows": "Windows: run the installer, then let the service start automatically from Services.",
}


class Writer(robotlab.Robot):
    """Drafts one section and leaves it in the shared memory."""

    async def call(self, result: Any) -> Any:
        drafted = await super().call(result)
        (out / f"{self.name}_draft.md").write_text(f"{drafted.value.reply}\n")
        network.memory.set(f"draft:{self.name}", str(drafted.value.reply))
        return drafted


class Combiner(robotlab.Robot):
    """Waits for every draft, then joins them into one article."""

    async def call(self, result: Any) -> Any:
        drafts = await network.memory.aget(*(f"draft:{name}" for name in SECTIONS), wait=120)
        joined = "\n\n".join(drafts.values())
        return await super().call(result.continue_(f"Join these sections into one article:\n\n{joined}"))


network = create_network(name="editorial")
for name, section in SECTIONS.items():
    network.task(name, Writer(name=name, system_prompt=f"You write the {name} section of a how-to article.",
                              llm=llm(section)))
network.task("combine", Combiner(
    name="combiner", system_prompt="You join sections into one Markdown article with a title.",
    llm=llm("# Installing the Agent\n\n" + "\n\n".join(SECTIONS.values())),
), depends_on=list(SECTIONS))

print("1. drafting in parallel")
article = str(network.run("Write how to install the agent on your operating system.").value.reply)
(out / "combined_article.md").write_text(f"{article}\n")
network.memory.set("article", article)

print("2. revising over the bus")
bus = MessageBus()
editor = robotlab.build(
    name="editor", bus=bus,
    system_prompt="You are a copy editor. Return the improved article, or exactly APPROVED if it needs no change.",
    llm=llm("# Installing the Agent\n\nPick your system below; each takes under five minutes.\n\n"
            + "\n\n".join(SECTIONS.values()), "APPROVED"),
).serve()
chief = robotlab.build(name="editor_in_chief", bus=bus)
for revision in (1, 2):
    sent = chief.send_message(to="editor", content=f"Revise this article:\n\n{article}")
    answer = str(chief.outbox[sent.key]["replies"][0].content)
    if answer.strip() == "APPROVED":
        print(f"   revision {revision}: the editor approved it")
        break
    article = answer
    (out / f"revision_{revision}.md").write_text(f"{article}\n")
    network.memory.set(f"revision:{revision}", article)
    print(f"   revision {revision}: {len(article.split())} words")

(out / "final_article.md").write_text(f"{article}\n")
(out / "memory.json").write_text(network.memory.to_json())
print("3. files written:")
for path in sorted(out.iterdir()):
    print(f"   {path.name} ({path.stat().st_size} bytes)")
print(f"final article in {out / 'final_article.md'}")
