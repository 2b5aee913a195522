"""The ``notesnet`` network of the Celery approval scenario: ``intake`` -> ``clerk``, the clerk writing notes.

Worker processes get it through ``ROBOTLAB_TEST_NETWORKS='{"notesnet": "tests.robotlab_django.notes_network.
notes_network"}'`` (test_network_workers.py). The clerk's write tools (``model_tools`` of the test app's notes,
approval on, as by default) park the turn until a person decides. Every save of a note in a process that built
the network appends ``saved <pk> <status>`` to the notes file (``ROBOTLAB_TEST_NOTES``), so the test counts the
writes the workers made.
"""

from __future__ import annotations

import os
from typing import Any

import robotlab
from tests.robotlab_django.fanout import MODEL, NOTES_ENV, system_prompt

__all__ = ["notes_network"]


def _saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    path = os.environ.get(NOTES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as notes:
            notes.write(f"{os.getpid()} saved {instance.pk} {instance.status}\n")


def notes_network(**options: Any) -> robotlab.Network:
    """``intake`` -> ``clerk``; ``options`` (``llm=``) go to both robots; the clerk may change notes."""
    from django.db.models.signals import post_save

    from robotlab_django.tools import model_tools
    from tests.robotlab_django.notesapp.models import Note

    post_save.connect(_saved, sender=Note, dispatch_uid="robotlab-tests-notes-saved")
    network = robotlab.create_network(name="notesnet")
    network.task("intake", robotlab.build(name="intake_bot", system_prompt=system_prompt("intake"), model=MODEL,
                                          **options))
    clerk = robotlab.build(name="clerk_bot", system_prompt=system_prompt("clerk"), model=MODEL,
                           local_tools=model_tools(Note, fields=["title", "status", "body"], owner_field="owner",
                                                   write=True), **options)
    network.task("clerk", clerk, depends_on=["intake"])
    return network
