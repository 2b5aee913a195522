"""18 - A Django chat: conversations and robot runs kept in the database by ``robotlab_django``.

A minimal Django set-up in one file (SQLite in memory, the ``robotlab_django`` app, its migrations): a
robot is registered by name with ``register_robot``, and ``run_robot(session, "chat", message)`` creates the
thread, restores its history into a fresh robot, runs it and stores the run as a ``RobotResult`` row
(reply, status, tokens, the messages the run added). The second message continues the stored conversation.

The full chat site (websockets, Celery, the admin, a login page) is the example project:
``scripts/run``, then http://127.0.0.1:8000/ (see ``docs/django/chat.md``).

Run it: ``python examples/18_django_chat.py`` (needs ``pip install "robotlab-py[django]"``; offline unless a
model is configured, see ``_offline.py``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django
from _offline import llm
from django.conf import settings
from django.core.management import call_command

import robotlab
from robotlab.testing import tool_call

settings.configure(
    DEBUG=False, SECRET_KEY="example-only", USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "robotlab_django"],
)
django.setup()
call_command("migrate", verbosity=0)

from robotlab_django.models import Thread  # noqa: E402  (models import once Django is set up)
from robotlab_django.registry import register_robot  # noqa: E402
from robotlab_django.services import restore_robot, run_robot  # noqa: E402


@robotlab.tool
def current_time() -> str:
    """The current date and time in UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


@register_robot(name="chat", description="A friendly assistant that knows the time")
def chat_robot(**options: Any) -> robotlab.Robot:
    return robotlab.build(name="chat", system_prompt="You are a friendly assistant. Use your tools when useful.",
                          local_tools=[current_time], **options)


model = llm("Hello Ada! How can I help?", tool_call("current_time"), f"It is {current_time()} right now.")
for message in ("Hi, I'm Ada.", "What time is it?"):
    row = run_robot("session-ada", "chat", message, llm=model)
    print(f"you> {message}\nchat> {row.reply}")
    print(f"  stored: result #{row.sequence_number}, {row.status}, {row.input_tokens}+{row.output_tokens} tokens, "
          f"{len(row.tool_calls_data)} tool call(s)")

thread = Thread.objects.get(session_id="session-ada")
print(f"thread {thread.session_id!r} (robot {thread.robot_name!r}): {thread.results.count()} results in the database")
print(f"a robot restored from it holds {len(restore_robot(thread, llm=model).messages)} messages")
