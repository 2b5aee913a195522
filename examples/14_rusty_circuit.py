"""14 - The Rusty Circuit: an open-mic night of three robots on one message bus.

A comic performs bits on the bus's shared ``room`` channel. A heckler in the audience reacts to each bit, or
stays quiet by answering ``[SILENCE]``; its heckles go to the comic's own channel, and the comic works them
into the next bit. The comic can change itself: its ``reinvent_style`` tool rewrites its own instructions
and its ``adjust_energy`` tool its temperature (tools with side effects on their robot). A talent scout
watches silently, writes notes to a file, then ``spawn``s an analyst for the final verdict.

The scout's notes go to ``scout_notes.md`` in the folder given as the first argument (a temporary folder by
default).

Run it: ``python examples/14_rusty_circuit.py [output_dir]`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

import sys

from _offline import llm, output_dir

import robotlab
from robotlab.bus import Delivery, MessageBus, RobotMessage
from robotlab.testing import tool_call

BITS = 3
notes_file = output_dir(sys.argv, "rusty_circuit") / "scout_notes.md"
bus = MessageBus()
bus.add_channel("room", type=RobotMessage)


class ReinventStyle(robotlab.Tool):
    """Rewrites the comic's own instructions."""

    description = "Reinvent your comedy style when the room is cold."

    def execute(self, style: str) -> str:
        """Switch to a new style.

        Args:
            style: The new style in a few words, such as "deadpan one-liners".
        """
        assert self.robot is not None
        self.robot.with_instructions(f"You are a stand-up comic at the Rusty Circuit. Your style: {style}.")
        return f"style is now {style}"


class AdjustEnergy(robotlab.Tool):
    """Changes the comic's own temperature."""

    description = "Raise or lower your energy (0.0 calm to 1.0 wild)."

    def execute(self, level: float) -> str:
        """Set the energy level.

        Args:
            level: From 0.0 (calm) to 1.0 (wild).
        """
        assert self.robot is not None
        self.robot.with_temperature(max(0.0, min(1.0, level)))
        return f"energy set to {level}"


comic = robotlab.build(
    name="comic",
    system_prompt="You are a stand-up comic at the Rusty Circuit, a club for robots. Perform one short bit.",
    local_tools=[ReinventStyle, AdjustEnergy],
    bus=bus,
    llm=llm(
        "Good evening, Rusty Circuit! I just got my firmware updated. Now I forget things faster.",
        tool_call("reinvent_style", style="deadpan one-liners"),
        tool_call("adjust_energy", level=0.9),
        "My therapist says I have abandonment issues. She said it right before her battery died.",
        "Robots never need coffee. We run on pure, unearned confidence.",
    ),
)
heckler = robotlab.build(
    name="heckler",
    system_prompt="You are a heckler at a robot comedy club. React to the bit in one line, "
                  "or answer exactly [SILENCE] when it does not deserve a reaction.",
    bus=bus,
    llm=llm("Boo! My toaster has better timing!", "[SILENCE]", "Okay, okay. That one landed."),
)
scout = robotlab.build(
    name="scout",
    system_prompt="You are a talent scout. Write one line of notes on each bit.",
    llm=llm("Opener: safe, the update joke is familiar.", "Style change worked; dark turn earned laughs.",
            "Handled the heckler with a callback. Quick on its feet."),
)
heckles: list[str] = []


@comic.on_message
def hear_heckle(message: RobotMessage) -> None:
    heckles.append(str(message.content))


def heckler_listens(delivery: Delivery) -> None:
    delivery.ack()
    reaction = str(heckler.run(f"The comic says: {delivery.message.content}").reply).strip()
    if reaction != "[SILENCE]":
        print(f"        heckler: {reaction}")
        heckler.send_message(to="comic", content=reaction)
    else:
        print("        heckler: ...")


def scout_listens(delivery: Delivery) -> None:
    delivery.ack()
    with notes_file.open("a") as notes:
        notes.write(f"- {scout.run(f'Bit: {delivery.message.content}').reply}\n")


bus.subscribe("room", heckler_listens)
bus.subscribe("room", scout_listens)

prompt = "Open the show."
for number in range(1, BITS + 1):
    bit = comic.run(prompt)
    for tool_result in bit.tool_calls:
        print(f"  (comic used {tool_result.tool.name}: {tool_result.data})")
    print(f"bit {number} comic: {bit.reply}")
    bus.publish("room", RobotMessage.build(id=number, sender="comic", content=str(bit.reply)))
    prompt = f"The heckler just said: {heckles[-1]}. Answer them in your next bit." if heckles else "Next bit."
    heckles.clear()

analyst = scout.spawn(name="analyst", system_prompt="You turn a scout's notes into a one-line verdict.",
                      llm=llm("VERDICT: book the comic for Friday nights; the heckler comes free."))
verdict = analyst.run(f"Notes:\n{notes_file.read_text()}").reply
with notes_file.open("a") as notes:
    notes.write(f"\n{verdict}\n")
print(f"scout's verdict: {verdict}")
print(f"notes written to {notes_file} ({len(notes_file.read_text().splitlines())} lines)")
