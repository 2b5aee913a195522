"""12 - The message bus: two robots talk to each other by name.

Alice, a comedy critic, asks Bob, a comedian, for a robot joke over a ``MessageBus``. Bob answers each task
with ``respond_to_tasks``; Alice judges each joke with her own model and sends Bob back for another try
until she laughs or the attempts run out. Bob's temperature rises from 0.2 to 1.0 with each attempt, for
more daring jokes. Alice's ``outbox`` pairs each request with its reply.

Run it: ``python examples/12_message_bus.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab
from robotlab.bus import MessageBus, RobotMessage

MAX_ATTEMPTS = 5

bus = MessageBus()
bob = robotlab.build(
    name="bob",
    system_prompt="You are a stand-up comedian. Tell exactly one short joke about robots, nothing else.",
    bus=bus,
    llm=llm(
        "Why did the robot go on holiday? It needed to recharge.",
        "My robot vacuum quit. It said the job really sucked.",
        "I asked my robot to tell a joke without any puns. It crashed trying to compute 'funny' without 'fun'.",
    ),
)
alice = robotlab.build(
    name="alice",
    system_prompt="You are a tough comedy critic. Start with FUNNY or NOT FUNNY, then give one short reason.",
    bus=bus,
    llm=llm("NOT FUNNY. The recharge pun is older than the steam engine.",
            "NOT FUNNY. Vacuum jokes belong in a vacuum.",
            "FUNNY. A self-defeating robot got me."),
)


@bob.respond_to_tasks
def tell_joke(message: RobotMessage) -> str:
    """Bob's handler (a plain function: it runs in a worker thread, so it may call ``run``)."""
    request = dict(message.content) if isinstance(message.content, dict) else {"task": message.content}
    bob.with_temperature(float(request.get("temperature", 0.7)))
    return str(bob.run(str(request["task"])).reply)


for attempt in range(1, MAX_ATTEMPTS + 1):
    temperature = round(0.2 + 0.8 * (attempt - 1) / (MAX_ATTEMPTS - 1), 2)
    sent = alice.send_message(to="bob", content={"task": "Tell me a robot joke.", "temperature": temperature})
    joke = alice.outbox[sent.key]["replies"][0].content
    print(f"[{sent.key}] bob (temperature {temperature}): {joke}")
    verdict = str(alice.run(f"Judge this joke: {joke}").reply)
    print(f"         alice: {verdict}")
    if verdict.strip().upper().startswith("FUNNY"):
        print(f"alice approved attempt {attempt} of {MAX_ATTEMPTS}")
        break
else:
    print(f"no joke made alice laugh in {MAX_ATTEMPTS} attempts")

print(f"alice's outbox: {[(key, entry['status']) for key, entry in alice.outbox.items()]}")
