"""16 - The writers' room: writers that organize themselves through shared memory and a bus.

No pipeline and no assigned roles: identical writer robots get one assignment (a three-chapter story) and
tools to coordinate. ``write_notes`` / ``read_notes`` use the room's shared memory (the outline and the
chapters), ``claim_chapter`` stops two writers taking the same chapter, ``say`` posts to the bus's ``room``
channel that every writer hears, ``recruit_writer`` ``spawn``s a new writer on the same bus when there is
more work than writers, and ``finish_book`` checks every chapter is there. The room runs turns until the
book is complete (or a turn limit), then writes ``book.md`` to the output folder.

Run it: ``python examples/16_writers_room.py [output_dir]`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

import sys
import threading

from _offline import llm, output_dir

import robotlab
from robotlab.bus import Delivery, MessageBus, RobotMessage
from robotlab.testing import text, tool_call, tool_calls

CHAPTERS = 3
MAX_TURNS = 4
out = output_dir(sys.argv, "writers_room")
room = robotlab.create_memory()
room.set("claims", {})
bus = MessageBus()
bus.add_channel("room", type=RobotMessage)
heard: list[str] = []
roster: list[robotlab.Robot] = []
claim_lock = threading.Lock()
SCRIPTS = {  # the offline writers' turns; a real model decides for itself
    "writer_1": [tool_calls(("write_notes", {"key": "outline", "text": "1. Signal. 2. Descent. 3. Reply."}),
                            ("claim_chapter", {"number": 1}),
                            ("say", {"message": "Outline is in memory; I have ch. 1."})),
                 text("Outline written, chapter 1 claimed."),
                 tool_call("write_notes", key="chapter_1", text="Chapter 1: The Signal\nA beacon wakes the ship."),
                 text("Chapter 1 written."),
                 tool_call("finish_book"), text("The book is complete.")],
    "writer_2": [tool_calls(("claim_chapter", {"number": 2}), ("recruit_writer", {"name": "writer_3"})),
                 text("Chapter 2 is mine; writer_3 joins for chapter 3."),
                 tool_call("write_notes", key="chapter_2", text="Chapter 2: The Descent\nThe crew lands on ice."),
                 text("Chapter 2 written.")],
    "writer_3": [tool_calls(("claim_chapter", {"number": 3}),
                            ("write_notes", {"key": "chapter_3", "text": "Chapter 3: The Reply\nThey answer."})),
                 text("Chapter 3 written.")],
}


class WriteNotes(robotlab.Tool):
    description = "Write a note to the room's shared memory (keys: outline, chapter_1, chapter_2, ...)."

    def execute(self, key: str, text: str) -> str:
        """Store a note.

        Args:
            key: The note's name.
            text: Its content.
        """
        room.current_writer = self.robot.name if self.robot else None
        room.set(key, text)
        return f"saved {key}"


class ReadNotes(robotlab.Tool):
    description = "Read a note from the room's shared memory."

    def execute(self, key: str) -> str:
        """Read a note.

        Args:
            key: The note's name.
        """
        return str(room.get(key) or f"no note called {key}")


class ClaimChapter(robotlab.Tool):
    description = "Claim a chapter so no one else writes it."

    def execute(self, number: int) -> str:
        """Claim a chapter.

        Args:
            number: The chapter number.
        """
        name = self.robot.name if self.robot else "?"
        with claim_lock:
            claims = dict(room.get("claims"))
            if claims.setdefault(str(number), name) != name:
                return f"chapter {number} is already claimed by {claims[str(number)]}"
            room.set("claims", claims)
        return f"chapter {number} is yours"


class Say(robotlab.Tool):
    description = "Say something to everyone in the room."

    def execute(self, message: str) -> str:
        """Post to the room.

        Args:
            message: What to say.
        """
        assert self.robot is not None
        bus.publish("room", RobotMessage.build(id=len(heard) + 1, sender=self.robot.name, content=message))
        return "said"


class RecruitWriter(robotlab.Tool):
    description = "Bring a new writer into the room when there is more work than writers."

    def execute(self, name: str) -> str:
        """Recruit a writer.

        Args:
            name: The new writer's name, such as writer_3.
        """
        assert self.robot is not None
        roster.append(self.robot.spawn(name=name, system_prompt=self.robot.instructions, local_tools=TOOLS,
                                       llm=llm(*SCRIPTS.get(name, ["I have nothing to add."]))))
        print(f"    {self.robot.name} recruited {name}")
        return f"{name} has joined the room"


class FinishBook(robotlab.Tool):
    description = "Mark the book complete once every chapter is written."

    def execute(self) -> str:
        """Finish the book."""
        missing = [n for n in range(1, CHAPTERS + 1) if room.get(f"chapter_{n}") is None]
        if missing:
            return f"not yet: chapters {missing} are missing"
        room.set("book_complete", True)
        return "the book is complete"


TOOLS = [WriteNotes, ReadNotes, ClaimChapter, Say, RecruitWriter, FinishBook]
PROMPT = (f"You are one of several writers writing a {CHAPTERS}-chapter science-fiction story together. "
          "Coordinate with the tools: plan in shared notes, claim a chapter before writing it, recruit help "
          "when chapters are unclaimed, and finish the book when every chapter exists.")
for name in ("writer_1", "writer_2"):
    roster.append(robotlab.build(name=name, system_prompt=PROMPT, local_tools=TOOLS, bus=bus,
                                 llm=llm(*SCRIPTS[name])))


def listen(delivery: Delivery) -> None:
    delivery.ack()
    heard.append(f"{delivery.message.sender}: {delivery.message.content}")
    print(f"    [room] {heard[-1]}")


bus.subscribe("room", listen)
room.subscribe_pattern("chapter_*", callback=lambda change: print(f"    [memory] {change.writer} wrote {change.key}"))

for turn in range(1, MAX_TURNS + 1):
    print(f"turn {turn}: {[writer.name for writer in roster]}")
    for writer in list(roster):
        news = "\n".join(heard[-5:]) or "nothing yet"
        notes = sorted(set(room.keys()) - {"claims"})
        reply = writer.run(f"Room messages: {news}\nNotes so far: {notes}\n"
                           f"Claims: {room.get('claims')}\nDo the next useful thing.").reply
        print(f"  {writer.name}: {reply}")
        if room.get("book_complete"):
            break
    if room.get("book_complete"):
        break

chapters = [str(room.get(f"chapter_{n}") or f"(chapter {n} missing)") for n in range(1, CHAPTERS + 1)]
(out / "book.md").write_text("\n\n".join(chapters) + "\n")
print(f"complete: {bool(room.get('book_complete'))} after {turn} turn(s); writers: {len(roster)} "
      f"({len(roster) - 2} recruited); claims: {room.get('claims')}")
print(f"book written to {out / 'book.md'}")
