"""22 - Context compression: drop the old turns a long conversation no longer needs.

``robot.compress_history()`` scores every older message against the last few turns (stemmed term-frequency
cosine similarity): relevant ones are kept, unrelated ones dropped, and the ones in between summarized by
your ``summarizer`` function when you give one. The example compresses a conversation that drifted from
castles to Python logging, first in drop mode and then with a summarizer, and shows the
``auto_compact`` run setting that does it before every run.

Run it: ``python examples/22_context_compression.py`` (offline unless a model is configured, see
``_offline.py``).
"""

from __future__ import annotations

from _offline import llm

import robotlab

CONVERSATION = [
    {"role": "user", "content": "Tell me about the history of medieval castles in France."},
    {"role": "assistant", "content": "Medieval French castles were built for defence and for prestige."},
    {"role": "user", "content": "Which python logging handlers write log files to disk?"},
    {"role": "assistant", "content": "FileHandler writes python logging records to a log file on disk."},
    {"role": "user", "content": "How do I rotate python log files every night with logging handlers?"},
    {"role": "assistant", "content": "Use TimedRotatingFileHandler: python logging rotates the log files nightly."},
    {"role": "user", "content": "Can python logging handlers compress the rotated log files?"},
    {"role": "assistant", "content": "Yes: give the rotating python logging handler a rotator that gzips log files."},
    {"role": "user", "content": "And how do I send python logging records from handlers to syslog?"},
    {"role": "assistant", "content": "SysLogHandler sends python logging records to syslog instead of log files."},
]


def show(label: str, robot: robotlab.Robot) -> None:
    print(f"{label}: {len(robot.messages)} messages")
    for message in robot.messages:
        print(f"  {message['role']:>9}: {str(message['content'])[:70]}")


chat = robotlab.build(name="chat", llm=llm("OK."))
chat.replace_messages(CONVERSATION)
show("before", chat)
chat.compress_history(recent_turns=3)
show("after compress_history() (drop mode)", chat)

summarizer = robotlab.build(name="summarizer", system_prompt="Summarize the text in at most eight words.",
                            llm=llm("Asked which handlers write files.", "FileHandler writes to disk.",
                                    "Asked about nightly rotation.", "TimedRotatingFileHandler rotates nightly."))
summarized = robotlab.build(name="chat", llm=llm("OK."))
summarized.replace_messages(CONVERSATION)
summarized.compress_history(recent_turns=2, keep_threshold=0.9, drop_threshold=0.1,
                            summarizer=lambda text: summarizer.run(f"Summarize: {text}").reply)
show("with a summarizer for the middle scores", summarized)


def keep_last_two_turns(robot: robotlab.Robot) -> None:
    robot.replace_messages(robot.messages[-4:])


automatic = robotlab.build(name="auto", config={"auto_compact": keep_last_two_turns}, llm=llm("Noted."))
automatic.replace_messages(CONVERSATION)
automatic.run("Thanks, that is all.")
show("auto_compact before the run, then the new turn", automatic)
