"""Side effects under worker kills, on the real stack, run as a driver process by test_effect_faults.py.

``python -m tests.robotlab_django.effect_faults <scenario>`` sets Django up against the shared database named by
the environment (a SQLite file, or a fresh PostgreSQL database: :func:`~tests.robotlab_django.faults.database_env`),
starts a Celery worker with one prefork child, answers the robot's model calls from a fake OpenAI-compatible server
in this process, SIGKILLs the pool child at one moment, and prints what it observed as one JSON line. Scenarios:

* ``tool-kill``: the ``mailer`` robot calls ``send_mail`` (a side effect: a line in a file), which blocks once the
  line is written; the pool child is killed there, inside the tool. The retry meets the journal's ``started`` row:
  the run parks, the effect ``unknown``, and the line is not written again. The driver then marks the effect done
  (as a person would in the admin) and the run completes, still with one line.
* ``write-kill``: the ``notekeeper`` robot creates a note with a model tool (the write and its journal row commit
  together), then streams its answer; the pool child is killed as soon as the note is committed. The retry does
  not write again and the run completes once. ``--no-checkpoints``: the model's tool call is sent again (the
  server gives the same call id), and the journal alone keeps the write from happening twice.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from tests.robotlab_django.faults import (
    ANSWER_TOKENS,
    CHECKPOINTS_ENV,
    LLM_BASE_ENV,
    NOTES_ENV,
    WAIT,
    Processes,
    _ended,
    _facts,
    _row,
    _setup,
    children,
    wait_for,
)

#: Seconds a fresh worker may take to reach the tool (its pool child imports the app and litellm first; a busy
#: machine takes long).
STARTUP = 3 * WAIT
#: A file whose appearance releases a blocked ``send_mail`` (the scenario kills it before).
RELEASE_ENV = "ROBOTLAB_FAULT_RELEASE"


def send_mail(to: str) -> str:
    """Send a mail (write a line), then block until released: the worker dies here.

    Args:
        to: To whom.
    """
    with open(os.environ[NOTES_ENV], "a", encoding="utf-8") as sent:
        sent.write(f"{to}\n")
    wait_for(lambda: Path(os.environ[RELEASE_ENV]).exists(), "the release of send_mail", timeout=STARTUP,
             interval=0.05)
    return f"sent to {to}"


def build_mailer(**options: Any) -> Any:
    """The ``tool-kill`` scenario's robot (``ROBOTLAB["ROBOTS"]["mailer"]``): one side-effecting call, an answer."""
    import robotlab

    return robotlab.build(name="mailer", system_prompt="You send mails.",
                          local_tools=[robotlab.tool(send_mail, side_effect=True)], **options)


def build_notekeeper(**options: Any) -> Any:
    """The ``write-kill`` scenario's robot (``ROBOTLAB["ROBOTS"]["notekeeper"]``): creates notes with model tools."""
    import robotlab
    from robotlab_django.tools import model_tools
    from tests.robotlab_django.notesapp.models import Note

    tools = model_tools(Note, fields=["title"], owner_field="owner", write=True, approve=False)
    return robotlab.build(name="notekeeper", system_prompt="You keep notes.", local_tools=tools, **options)


def _lines() -> list[str]:
    path = Path(os.environ[NOTES_ENV])
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _effects(pk: int) -> list[dict[str, Any]]:
    from robotlab_django.models import ToolEffect

    return list(ToolEffect.objects.filter(result_pk=str(pk)).order_by("pk").values(
        "status", "attempts", "atomic", "tool_name", "step", "call_id", "result"))


def _status(pk: int) -> str:
    return str(_row(pk).status)


def _start(robot: str, message: str, queue: str, user: Any) -> Any:
    from robotlab_django import services
    from robotlab_django.runs import executor

    row = services.start_run(services.get_thread(None, user=user), robot, message)
    executor.enqueue(row, queue=queue)  # autocommit: sent at once
    return row


def _kill_child(worker: Any) -> list[int]:
    killed = children(worker.pid)
    for pid in killed:
        os.kill(pid, signal.SIGKILL)
    return killed


def tool_kill(processes: Processes, server: Any) -> dict[str, Any]:
    """Kill the pool child inside ``send_mail``; the retry parks; resolved as done, the run completes once."""
    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab.testing.server import call, reply, tool_calls
    from robotlab_django.models import RunEvent, ToolEffect
    from robotlab_django.runs import effect_control

    server.responder = lambda body: (reply("Mail sent.") if body["messages"][-1]["role"] == "tool"
                                     else tool_calls(call("send_mail", to="ada")))
    user, _session = _setup()
    queue = f"robotlab-faults-{uuid.uuid4().hex[:8]}"
    row = _start("mailer", "Mail ada", queue, user)
    worker = processes.worker(queue)
    wait_for(lambda: _lines(), "send_mail to have written its line", timeout=STARTUP)
    killed = _kill_child(worker)
    wait_for(lambda: _status(row.pk) == "awaiting", "the retry to park on the unknown effect", timeout=2 * WAIT)
    parked = _row(row.pk)
    at_park = {"status": str(parked.status), "attempts": parked.attempts, "question": parked.question,
               "effects": _effects(row.pk), "lines": len(_lines()), "requests": len(server.requests),
               "hitl_requested": RunEvent.objects.filter(result_id=row.pk, kind="hitl.requested").count()}
    effect = ToolEffect.objects.get(result_pk=str(row.pk))
    effect_control.mark_done(effect, "sent to ada (checked by hand)", check=False)  # runs it here ("sync")
    wait_for(lambda: _ended(row.pk), "the resolved run to complete and its end to be stored")
    bodies = server.requests
    return {"killed": killed, "at_park": at_park, "lines": len(_lines()), "effects": _effects(row.pk),
            "requests": len(bodies), "last_tool_result": bodies[-1]["messages"][-1]["content"], "run": _facts(row.pk)}


def write_kill(processes: Processes, server: Any) -> dict[str, Any]:
    """Kill the pool child as soon as the model tool's note is committed; the retry completes without a new write."""
    from django.contrib.auth.models import Permission

    import tests.robotlab_django.fault_celery  # noqa: F401  (tasks are sent through its broker)
    from robotlab.testing.server import call, tokens, tool_calls
    from robotlab_django.models import RunStep
    from tests.robotlab_django.notesapp.models import Note

    server.responder = lambda body: (tokens(ANSWER_TOKENS, tokens_per_second=40)
                                     if body["messages"][-1]["role"] == "tool"
                                     else tool_calls(call("create_note", title="milk", id="call-note-1")))
    user, _session = _setup()
    user.user_permissions.add(Permission.objects.get(codename="add_note"))
    queue = f"robotlab-faults-{uuid.uuid4().hex[:8]}"
    row = _start("notekeeper", "Note milk", queue, user)
    worker = processes.worker(queue)
    wait_for(lambda: Note.objects.filter(owner=user).exists(), "the note to be committed", timeout=STARTUP,
             interval=0.01)
    killed = _kill_child(worker)
    killed_at = time.monotonic()
    wait_for(lambda: _ended(row.pk), "the killed run to finish on its retry and its end to be stored",
             timeout=2 * WAIT)
    bodies = server.requests
    messages = _row(row.pk).messages
    return {"killed": killed, "seconds_to_finish": round(time.monotonic() - killed_at, 3),
            "notes": list(Note.objects.filter(owner=user).values_list("title", flat=True)),
            "effects": _effects(row.pk), "requests": len(bodies),
            "tool_call_requests": sum(body["messages"][-1]["role"] != "tool" for body in bodies),
            "final_messages": sum(m.get("role") == "assistant" and not m.get("tool_calls") for m in messages),
            "steps": list(RunStep.objects.filter(result_id=row.pk).order_by("idx").values_list("idx", "kind")),
            "run": _facts(row.pk)}


def main() -> int:
    """Run one scenario (the environment names the database and Redis) and print its facts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=["tool-kill", "write-kill"])
    parser.add_argument("--no-checkpoints", action="store_true", help="without ROBOTLAB['CHECKPOINT_STEPS']")
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    from robotlab.testing.server import FakeLLMServer

    server = FakeLLMServer().start()
    os.environ.update({LLM_BASE_ENV: server.base_url, NOTES_ENV: str(args.workdir / "sent.txt"),
                       RELEASE_ENV: str(args.workdir / "release"),
                       CHECKPOINTS_ENV: "0" if args.no_checkpoints else "1",
                       "ROBOTLAB_TEST_LLM": "tests.robotlab_django.faults.server_llm",
                       "ROBOT_LAB_MODEL": "openai/gpt-4o-mini"})  # the worker inherits this environment
    import django

    django.setup()
    processes = Processes(args.workdir, dict(os.environ))
    try:
        facts = (tool_kill if args.scenario == "tool-kill" else write_kill)(processes, server)
    finally:
        Path(os.environ[RELEASE_ENV]).touch()  # a blocked tool (a kill that missed) ends
        processes.stop_all()
        server.stop()
    print(json.dumps(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
