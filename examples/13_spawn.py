"""13 - Spawning robots: a dispatcher creates the specialists it needs as it goes.

The dispatcher asks its model which kind of specialist a question needs, ``spawn``s one the first time
(on the dispatcher's bus, which ``spawn`` creates when there is none), and reuses it for later questions of
the same kind. Each specialist ``serve``s its tasks; the dispatcher's ``on_message`` handler sees the replies.

Run it: ``python examples/13_spawn.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab
from robotlab.bus import RobotMessage

QUESTIONS = [
    "Why do stars twinkle?",
    "How long should I rest a steak after cooking it?",
    "What is a light-year?",
]
SPECIALIST_ANSWERS = {  # the offline specialists' replies
    "astronomer": ["Starlight bends through moving layers of air, so it flickers.",
                   "The distance light travels in a year: about 9.46 trillion km."],
    "chef": ["About five minutes for a typical steak, so the juices settle."],
}

dispatcher = robotlab.build(
    name="dispatcher",
    system_prompt="Name the one kind of specialist who should answer the question, as one lowercase word.",
    llm=llm("astronomer", "chef", "astronomer"),
)
print(f"bus before the first spawn: {dispatcher.bus}")
specialists: dict[str, robotlab.Robot] = {}
replies: list[RobotMessage] = []
dispatcher.on_message(replies.append)  # replies to the dispatcher's questions arrive here

for question in QUESTIONS:
    kind = str(dispatcher.run(question).reply).strip().lower().strip(".").split()[0]
    dispatcher.clear_messages()
    if kind not in specialists:
        specialists[kind] = dispatcher.spawn(
            name=kind,
            system_prompt=f"You are an expert {kind}. Answer in one or two sentences.",
            llm=llm(*SPECIALIST_ANSWERS.get(kind, ["I'm not sure, but here is my best guess."])),
        ).serve()
        print(f"spawned a new {kind!r} on {dispatcher.bus}")
    else:
        print(f"reusing the {kind!r}")
    dispatcher.send_message(to=kind, content=question)
    print(f"  Q: {question}\n  {replies[-1].sender}: {replies[-1].content}")

print(f"specialists: {sorted(specialists)}; replies received: {len(replies)}")
