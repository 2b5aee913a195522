"""01 - A simple robot: build one, ask it something, read the result.

Shows ``robotlab.build`` with a system prompt, ``robot.run`` and the ``RobotResult`` it returns (the reply,
token counts, the stop reason), and that the robot keeps the conversation between runs.

Run it: ``python examples/01_simple_robot.py``. Offline by default (a scripted model, see ``_offline.py``);
set ``ROBOT_LAB_MODEL=openai/gpt-4o-mini`` and ``OPENAI_API_KEY`` (or another provider's) to use a real model.
"""

from __future__ import annotations

from _offline import llm

import robotlab

robot = robotlab.build(
    name="helper",
    system_prompt="You are a friendly assistant. Answer in one or two sentences.",
    llm=llm(
        "Ruby is a dynamic, object-oriented language designed by Yukihiro Matsumoto for programmer happiness.",
        "Python is a readable general-purpose language; Ruby and Python are close cousins.",
    ),
)

result = robot.run("What is Ruby, in one sentence?")
print(f"{result.robot_name}: {result.reply}")
print(f"tokens: {result.input_tokens} in, {result.output_tokens} out; stop reason: {result.stop_reason}")

follow_up = robot.run("And how does it compare to Python?")
print(f"{follow_up.robot_name}: {follow_up.reply}")
print(f"messages in the conversation: {len(robot.messages)}")
