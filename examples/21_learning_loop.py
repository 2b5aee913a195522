"""21 - A learning loop: a code reviewer that carries lessons from one review to the next.

After each review the robot ``learn``s the lesson it wrote on its last line. Every later run's message
is sent with a ``LEARNINGS FROM PREVIOUS RUNS:`` block in front (``inject_learnings`` shows it). A broader
lesson replaces the narrower ones it contains, and a lesson already known is not stored twice. The list is
also kept in the robot's memory, so a rebuilt robot can pick it up again.

Run it: ``python examples/21_learning_loop.py`` (offline unless a model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab

SNIPPETS = [
    "data = open('report.csv').read()",
    "for line in open(path): total += int(line)",
    "f = open(name, 'w'); f.write(text)",
]

reviewer = robotlab.build(
    name="reviewer",
    system_prompt="You review Python snippets in two sentences. End with one line: LESSON: <what to check next time>.",
    llm=llm(
        "The file is never closed.\nLESSON: Check that files are closed",
        "The loop leaks the file handle too.\nLESSON: Check that files are closed, ideally with a with-block",
        "The handle stays open if write fails.\nLESSON: Prefer pathlib's write_text for one-shot writes",
    ),
)

for snippet in SNIPPETS:
    review = str(reviewer.run(f"Review: {snippet}").reply)
    lesson = next((line.split(":", 1)[1].strip() for line in review.splitlines() if line.startswith("LESSON:")), None)
    reviewer.learn(lesson)
    print(f"reviewed {snippet!r}\n  learned: {lesson}\n  learnings now: {reviewer.learnings}")

print("\nthe next message the model will receive:")
print(reviewer.inject_learnings("Review: json.load(open('config.json'))"))

saved = reviewer.memory.get("learnings") or []
rebuilt = robotlab.build(name="reviewer", system_prompt=reviewer.instructions, llm=llm("Looks fine."))
for learned in saved:
    rebuilt.learn(learned)
print(f"\nrebuilt reviewer starts with {len(rebuilt.learnings)} learning(s): {rebuilt.learnings}")
