"""Model tools (issue 27, item 3): a robot works on a project's rows only as the run's user may.

Robots here are driven by :class:`robotlab.testing.FakeLLM` and run through the app's sync bridge
(:func:`~robotlab_django.runs.sync_bridge.call_sync`), so the tools' database work happens on the test's connection,
inside its transaction; what the model reads is taken from the requests it was sent.
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, models

from robotlab import RunContext, Tool, build
from robotlab.robot.request import RunUsage
from robotlab.testing import FakeLLM, tool_call
from robotlab_django import RunDeps
from robotlab_django.runs.sync_bridge import call_sync
from robotlab_django.tools import model_tools
from tests.robotlab_django.notesapp.models import Note, Project

pytestmark = pytest.mark.django_db

FIELDS = ["title", "body", "status", "priority", "due", "amount", "project"]


def user(name: str, *permissions: str, team: str = "") -> Any:
    """A user with these permissions of the notes app (``add_note`` ...), read afresh (no permission cache)."""
    model = get_user_model()
    created = model.objects.create_user(name, last_name=team)
    created.user_permissions.add(*Permission.objects.filter(content_type__app_label="notesapp",
                                                            codename__in=permissions))
    return model.objects.get(pk=created.pk)


def named(tools: list[Tool]) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


def ask(name: str, **arguments: Any) -> Any:
    """The model's call of the tool ``name`` (any argument names: ``id`` too, which ``tool_call`` keeps)."""
    return tool_call(name, raw_arguments=json.dumps(arguments))


def run(tools: list[Tool], who: Any, *calls: Any) -> list[Any]:
    """Run a robot whose model makes ``calls`` for ``who``: what the model read back, one item per call."""
    llm = FakeLLM([*calls, "done"])
    robot = build(name="notes", llm=llm, local_tools=tools, doom_loop_threshold=100)
    assert call_sync(robot.arun, "go", deps=RunDeps(user=who, run_id="r-1")).reply == "done"
    read = [request.messages[-1]["content"] for request in llm.requests[1:]]
    return [text if text.startswith("Error (") else json.loads(text) for text in read]


def call(tool: Tool, who: Any, **arguments: Any) -> Any:
    """Call ``tool`` directly in a run for ``who``."""
    context = RunContext(deps=RunDeps(user=who), run_id="direct", robot=build(llm=FakeLLM()), usage=RunUsage())
    return call_sync(tool.acall, arguments, run_context=context)


def test_alices_run_sees_only_alices_rows() -> None:
    alice, bob = user("alice"), user("bob")
    milk = Note.objects.create(owner=alice, title="buy milk")
    mum = Note.objects.create(owner=alice, title="call mum", priority=3)
    hidden = Note.objects.create(owner=bob, title="bob's secret plan")
    tools = model_tools(Note, fields=["title", "priority"], owner_field="owner")

    search, get_own, get_bobs = run(tools, alice, ask("search_note"), ask("get_note", id=milk.pk),
                                    ask("get_note", id=hidden.pk))
    assert search == {"total": 2, "offset": 0, "rows": [{"id": milk.pk, "title": "buy milk", "priority": 1},
                                                        {"id": mum.pk, "title": "call mum", "priority": 3}]}
    assert get_own == {"id": milk.pk, "title": "buy milk", "priority": 1}
    # a row outside the user's is refused in the same words whether it exists or not
    assert get_bobs == f"Error (get_note): there is no note with id {hidden.pk} among the notes you may see"
    assert call(named(tools)["get_note"], alice, id=999) == (
        "Error (get_note): there is no note with id 999 among the notes you may see")
    assert run(tools, bob, ask("search_note"))[0]["rows"] == [
        {"id": hidden.pk, "title": "bob's secret plan", "priority": 1}]


def test_without_an_owner_the_view_permission_decides() -> None:
    apollo = Project.objects.create(name="Apollo")
    tools = named(model_tools(Project, fields=["name"]))
    assert call(tools["search_project"], user("carol"), name="Apollo") == (
        "Error (search_project): refused: you may not see projects (this needs the permission "
        "notesapp.view_project)")
    assert call(tools["search_project"], user("dave", "view_project")) == {
        "total": 1, "offset": 0, "rows": [{"id": apollo.pk, "name": "Apollo"}]}


def test_bobs_create_without_the_add_permission_is_refused_and_writes_nothing() -> None:
    bob, alice = user("bob"), user("alice", "add_note")
    tools = model_tools(Note, fields=FIELDS, owner_field="owner", write=True)

    [refused] = run(tools, bob, ask("create_note", title="sneaky"))
    assert refused == ("Error (create_note): refused: you may not add notes (this needs the permission "
                       "notesapp.add_note); nothing was changed")
    assert Note.objects.count() == 0

    [created] = run(tools, alice, ask("create_note", title="plan", priority=2, due="2026-12-24"))
    note = Note.objects.get()
    assert (note.owner, note.title, note.priority, note.due) == (alice, "plan", 2, datetime.date(2026, 12, 24))
    assert created == {"id": note.pk, "title": "plan", "body": "", "status": "open", "priority": 2,
                       "due": "2026-12-24", "amount": "0.00", "project": None}


def test_a_scope_restricts_the_rows_and_writes_may_not_leave_it() -> None:
    red, blue = Project.objects.create(name="Red rocket", team="red"), Project.objects.create(name="Blue", team="blue")
    alice = user("alice", "view_note", "add_note", "change_note", team="red")
    bob = user("bob")
    mine = Note.objects.create(owner=bob, title="red by bob", project=red)  # the team's, though bob's
    theirs = Note.objects.create(owner=alice, title="blue by alice", project=blue)

    def same_team(rows: models.QuerySet[Any], who: Any) -> models.QuerySet[Any]:
        return rows.filter(project__team=who.last_name)

    tools = model_tools(Note, fields=["title", "project"], owner_field="owner", scope=same_team, write=True)
    search, moved, outside = run(
        tools, alice, ask("search_note"), ask("update_note", id=mine.pk, project=blue.pk),
        ask("create_note", title="for blue", project=blue.pk))
    assert search == {"total": 1, "offset": 0, "rows": [
        {"id": mine.pk, "title": "red by bob", "project": {"pk": red.pk, "str": "Red rocket"}}]}
    assert moved == ("Error (update_note): refused: after this change the note would no longer be among the notes "
                     "you may see; nothing was changed")
    assert outside == ("Error (create_note): refused: the new note would not be among the notes you may see; "
                       "nothing was saved")
    mine.refresh_from_db()
    assert mine.project == red and Note.objects.count() == 2
    assert call(named(tools)["get_note"], alice, id=theirs.pk).startswith("Error (get_note): there is no note")


def test_a_field_not_listed_can_be_neither_filtered_on_nor_written() -> None:
    alice = user("alice", "add_note", "change_note")
    note = Note.objects.create(owner=alice, title="plan", secret="s3cret")
    tools = model_tools(Note, fields=["title", "status"], owner_field="owner", write=True)
    answers = run(tools, alice,
                  ask("search_note", secret="s3cret"),
                  ask("search_note", title__gte="a"),
                  ask("search_note", order_by="secret"),
                  ask("create_note", title="x", secret="mine"),
                  ask("update_note", id=note.pk, secret="changed"),
                  ask("update_note", id=note.pk, owner=1))
    assert answers == [
        "Error (search_note): unknown filter 'secret': the filters are title, title__icontains, title__in, status, "
        "status__in",
        "Error (search_note): unknown filter 'title__gte': the filters are title, title__icontains, title__in, "
        "status, status__in",
        "Error (search_note): order_by: 'secret' is not a listed field; sort by one of -status, -title, status, "
        "title",
        "Error (create_note): unknown field 'secret': the fields of notes you may set are title, status",
        "Error (update_note): unknown field 'secret': the fields of notes you may set are title, status",
        "Error (update_note): unknown field 'owner': the fields of notes you may set are title, status",
    ]
    note.refresh_from_db()
    assert (Note.objects.count(), note.secret) == (1, "s3cret")
    assert all("secret" not in json.dumps(tool.to_json_schema()) for tool in tools)


def test_full_clean_errors_reach_the_model_as_text() -> None:
    alice = user("alice", "add_note", "change_note")
    note = Note.objects.create(owner=alice, title="plan")
    tools = model_tools(Note, fields=FIELDS, owner_field="owner", write=True)
    answers = run(tools, alice,
                  ask("create_note", title="x" * 41, priority=9),
                  ask("update_note", id=note.pk, status="done"),
                  ask("create_note", title="t", project=404))
    assert answers == [
        "Error (create_note): not saved: title: Ensure this value has at most 40 characters (it has 41).; "
        "priority: Ensure this value is less than or equal to 5.",
        "Error (update_note): not saved: A done note needs a body saying what was done.",
        "Error (create_note): not saved: project: project instance with id 404 is not a valid choice.",
    ]
    note.refresh_from_db()
    assert (Note.objects.count(), note.status) == (1, "open")


def test_values_of_the_wrong_type_are_refused_in_plain_words() -> None:
    alice = user("alice", "add_note")
    tools = named(model_tools(Note, fields=FIELDS, owner_field="owner", write=True))
    search = tools["search_note"]
    assert call(search, alice, priority="high") == (
        "Error (search_note): priority: expected an integer, got string 'high'")
    assert call(search, alice, due__gte="2026-02-30") == (
        "Error (search_note): due__gte: “2026-02-30” value has the correct format (YYYY-MM-DD) but it is an invalid "
        "date.")
    assert call(search, alice, status="closed") == "Error (search_note): status: 'closed' is not one of open, done"
    assert call(search, alice, status__in="open") == (
        "Error (search_note): status__in: expected a list of values, got 'open'")
    assert call(tools["create_note"], alice, title="t", priority=True) == (
        "Error (create_note): priority: expected an integer, got boolean True")
    assert call(tools["get_note"], alice) == "Error (get_note): invalid arguments: missing required id"
    assert Note.objects.count() == 0


def test_filters_are_typed_from_the_fields_and_related_rows_show_pk_and_str() -> None:
    alice = user("alice")
    apollo = Project.objects.create(name="Apollo")
    for title, priority, due, amount in [("alpha", 1, None, "1.50"), ("beta", 3, "2026-01-10", "20"),
                                         ("gamma", 5, "2026-03-01", "300.25")]:
        Note.objects.create(owner=alice, title=title, priority=priority, due=due, amount=Decimal(amount),
                            project=apollo if priority > 1 else None)
    search = named(model_tools(Note, fields=FIELDS, owner_field="owner"))["search_note"]

    def titles(**arguments: Any) -> list[str]:
        found = call(search, alice, **arguments)
        return [row["title"] for row in found["rows"]]

    assert titles(priority__gte=3) == ["beta", "gamma"]
    assert titles(title__icontains="AMM") == ["gamma"]
    assert titles(due=None) == ["alpha"]
    assert titles(due__lte="2026-02-01") == ["beta"]
    assert titles(amount__gte="20", amount__lte=100) == ["beta"]
    assert titles(project=apollo.pk, order_by="-priority") == ["gamma", "beta"]
    assert titles(title__in=["alpha", "gamma"], order_by="-title") == ["gamma", "alpha"]
    assert call(search, alice, title="gamma")["rows"] == [
        {"id": Note.objects.get(title="gamma").pk, "title": "gamma", "body": "", "status": "open", "priority": 5,
         "due": "2026-03-01", "amount": "300.25", "project": {"pk": apollo.pk, "str": "Apollo"}}]


def test_max_rows_holds_and_the_total_counts_every_match() -> None:
    alice = user("alice")
    Note.objects.bulk_create(Note(owner=alice, title=f"note {n}") for n in range(7))
    search = named(model_tools(Note, fields=["title"], owner_field="owner", max_rows=3))["search_note"]
    first = call(search, alice)
    assert (first["total"], [row["title"] for row in first["rows"]]) == (7, ["note 0", "note 1", "note 2"])
    assert [row["title"] for row in call(search, alice, limit=2, offset=6)["rows"]] == ["note 6"]
    assert call(search, alice, limit=4) == "Error (search_note): limit must be between 1 and 3, not 4"
    assert call(search, alice, offset=-1) == "Error (search_note): offset must be at least 0, not -1"
    assert search.parameters is not None
    assert search.parameters["properties"]["limit"] == {
        "type": "integer", "minimum": 1, "maximum": 3, "default": 3,
        "description": "how many rows to return (at most 3)"}


def test_the_schema_the_model_sees_has_no_context_and_is_typed_from_the_fields() -> None:
    llm = FakeLLM(["hi"])
    tools = model_tools(Note, fields=[*FIELDS, "owner", "created_at"], owner_field="owner", write=True,
                        max_rows=10)
    build(llm=llm, local_tools=tools).run("hello", deps=RunDeps(user=None))
    functions = {schema["function"]["name"]: schema["function"]["parameters"] for schema in llm.requests[0].tools}
    assert list(functions) == ["search_note", "get_note", "create_note", "update_note", "delete_note"]
    assert all("context" not in parameters["properties"] and "ctx" not in parameters["properties"]
               for parameters in functions.values())
    create = functions["create_note"]
    assert create["required"] == ["title"] and create["additionalProperties"] is False
    assert set(create["properties"]) == set(FIELDS)  # not the owner, nor what Django sets (created_at)
    assert create["properties"]["title"] == {"type": "string", "maxLength": 40, "description": "title"}
    assert create["properties"]["body"]["description"] == "body; What the note says"
    assert create["properties"]["status"] == {"type": "string", "enum": ["open", "done"],
                                              "description": "status; one of open (Open), done (Done)"}
    assert create["properties"]["priority"] == {"type": "integer", "minimum": 0, "maximum": 5,
                                                "description": "priority"}
    assert create["properties"]["due"] == {"type": ["string", "null"], "format": "date", "description": "due"}
    assert create["properties"]["project"] == {"type": ["integer", "null"],
                                               "description": "project; the id of a project"}
    assert functions["get_note"] == {"type": "object", "properties": {"id": {"type": "integer"}},
                                     "additionalProperties": False, "required": ["id"]}
    assert functions["update_note"]["required"] == ["id"]
    search = functions["search_note"]["properties"]
    assert {"owner", "owner__in", "created_at__gte", "due__lte", "title__icontains", "status__in"} <= set(search)
    assert "status__icontains" not in search and "priority__icontains" not in search
    assert search["created_at__gte"] == {"type": "string", "format": "date-time",
                                         "description": "created at is at least"}


def test_write_tools_are_marked_side_effects_awaiting_approval_unless_told_otherwise() -> None:
    flags = {tool.name: (tool.side_effect, tool.approve)
             for tool in model_tools(Note, fields=["title"], owner_field="owner", write=True)}
    assert flags == {"search_note": (False, False), "get_note": (False, False), "create_note": (True, True),
                     "update_note": (True, True), "delete_note": (True, True)}
    unapproved = model_tools(Note, fields=["title"], write=True, approve=False, name="memo")
    assert [(tool.name, tool.approve) for tool in unapproved][2:] == [
        ("create_memo", False), ("update_memo", False), ("delete_memo", False)]


def test_update_and_delete_need_their_permission_and_a_row_the_user_sees() -> None:
    alice = user("alice", "change_note", "delete_note")
    mallory = user("mallory", "view_note", "change_note", "delete_note")
    note = Note.objects.create(owner=alice, title="plan", body="draft")
    tools = model_tools(Note, fields=["title", "body", "status"], owner_field="owner", write=True)
    # mallory's view permission shows her the rows the owner_field gives her: her own, not alice's
    assert run(tools, mallory, ask("update_note", id=note.pk, title="owned"),
               ask("delete_note", id=note.pk)) == [
        f"Error (update_note): there is no note with id {note.pk} among the notes you may see",
        f"Error (delete_note): there is no note with id {note.pk} among the notes you may see"]
    changed, deleted = run(tools, alice, ask("update_note", id=note.pk, status="done"),
                           ask("delete_note", id=note.pk))
    assert changed == {"id": note.pk, "title": "plan", "body": "draft", "status": "done"}
    assert deleted == {"deleted": {"id": note.pk, "str": "plan"}}
    assert not Note.objects.exists()
    kept = Note.objects.create(owner=user("erin"), title="keep")
    erin = get_user_model().objects.get(username="erin")
    assert call(named(tools)["delete_note"], erin, id=kept.pk) == (
        "Error (delete_note): refused: you may not delete notes (this needs the permission notesapp.delete_note); "
        "nothing was changed")
    assert Note.objects.filter(pk=kept.pk).exists()


def test_a_run_without_an_active_user_is_refused() -> None:
    search = named(model_tools(Note, fields=["title"], owner_field="owner"))["search_note"]
    assert call(search, None) == (
        "Error (search_note): refused: notes are only for a signed-in user, and this run is for none")
    gone = user("gone")
    gone.is_active = False
    assert call(search, gone) == (
        "Error (search_note): refused: the run's user is inactive, so notes are not theirs to use")
    plain = build(llm=FakeLLM())
    context = RunContext(deps={"no": "user"}, run_id="x", robot=plain, usage=RunUsage())
    assert call_sync(search.acall, {}, run_context=context).startswith("Error (search_note): refused:")


def test_a_misconfiguration_is_refused_when_the_tools_are_made() -> None:
    with pytest.raises(ImproperlyConfigured, match="Note has no field 'colour'"):
        model_tools(Note, fields=["title", "colour"])
    with pytest.raises(ImproperlyConfigured, match="owner_field 'project' of notesapp.Note must be a foreign key "
                                                   "to the user model"):
        model_tools(Note, fields=["title"], owner_field="project")
    with pytest.raises(ImproperlyConfigured, match="'notes' of notesapp.Project is not a column"):
        model_tools(Project, fields=["notes"])
    with pytest.raises(ImproperlyConfigured, match="max_rows must be at least 1"):
        model_tools(Note, fields=["title"], max_rows=0)
    with pytest.raises(ImproperlyConfigured, match="non-empty list"):
        model_tools(Note, fields="title")


@pytest.mark.django_db(transaction=True)
async def test_the_tools_work_from_async_code_through_djangos_executor() -> None:
    from asgiref.sync import sync_to_async

    alice = await sync_to_async(user)("alice", "add_note")
    tools = named(model_tools(Note, fields=["title"], owner_field="owner", write=True))
    context = RunContext(deps=RunDeps(user=alice), run_id="a", robot=build(llm=FakeLLM()), usage=RunUsage())
    created = await tools["create_note"].acall({"title": "async"}, run_context=context)
    assert created == {"id": created["id"], "title": "async"}
    assert (await tools["search_note"].acall({}, run_context=context))["total"] == 1
    assert await Note.objects.filter(owner=alice).acount() == 1
    await sync_to_async(connections.close_all)()  # the executor thread's connection, before the database goes
