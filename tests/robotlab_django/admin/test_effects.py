"""The tool effects admin (issue 27, item 6): the journal browsable and filtered, unknown outcomes resolved there.

The runs here are rows in the states a worker leaves them in (an ``unknown`` effect, its run ``awaiting`` on it);
resuming such a run end to end is tests/robotlab_django/runs/test_effects.py's.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from robotlab_django.models import RobotResult, Status, Thread, ToolEffect

pytestmark = pytest.mark.django_db

URL = "/admin/robotlab/tooleffect/"
HOSTILE = "<script>alert(1)</script>"


def _parked(owner: Any, tool: str = "send_mail", robot: str = "echo") -> ToolEffect:
    """An effect of unknown outcome, and the run of ``owner``'s thread parked on it."""
    thread = Thread.objects.create(session_id=f"s-{tool}", user=owner, robot_name=robot)
    row = RobotResult.objects.create(thread=thread, sequence_number=1, robot_name=robot, status=Status.AWAITING,
                                     input="Mail ada")
    effect = ToolEffect.objects.create(key=f"{row.pk}:1:call-1", result_pk=str(row.pk), run_id=row.run_id, step=1,
                                       call_id="call-1", robot_name=robot, tool_name=tool, user=owner,
                                       arguments={"to": HOSTILE}, status=ToolEffect.Status.UNKNOWN)
    RobotResult.objects.filter(pk=row.pk).update(question={"request_id": "q1", "question": "An effect's outcome is "
                                                           "unknown", "effect": effect.pk})
    return effect


def _staff(django_user_model: Any, *codenames: str) -> Client:
    staff = django_user_model.objects.create_user("clerk", password="pw", is_staff=True)
    staff.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(staff)
    return client


def test_the_journal_is_listed_filtered_and_escaped(admin_client: Any, django_user_model: Any) -> None:
    alice = django_user_model.objects.create_user("alice")
    effect = _parked(alice)
    other = ToolEffect.objects.create(key="x:1:c", result_pk="0", run_id="r-other", step=1, robot_name="billing",
                                      tool_name="charge", status=ToolEffect.Status.COMPLETED,
                                      result={"json": '"charged"'})
    page = admin_client.get(URL).content.decode()
    assert "send_mail" in page and "charge" in page and HOSTILE not in page and "&lt;script&gt;" in page
    for query, expected in [("status=unknown", effect), ("robot_name=billing", other),
                            ("tool_name=send_mail", effect), (f"user__id__exact={alice.pk}", effect)]:
        listed = admin_client.get(f"{URL}?{query}").content.decode()
        unexpected = other if expected is effect else effect
        assert f"/tooleffect/{expected.pk}/change/" in listed, query
        assert f"/tooleffect/{unexpected.pk}/change/" not in listed, query
    detail = admin_client.get(f"{URL}{effect.pk}/change/").content.decode()
    assert effect.run_id in detail and HOSTILE not in detail and 'name="status"' not in detail  # read-only


def test_staff_who_may_only_view_cannot_resolve(django_user_model: Any) -> None:
    effect = _parked(django_user_model.objects.create_user("alice"))
    client = _staff(django_user_model, "view_tooleffect")
    assert "retry_effects" not in client.get(URL).content.decode()
    client.post(URL, {"action": "retry_effects", "_selected_action": [effect.pk]})
    assert ToolEffect.objects.get(pk=effect.pk).status == "unknown"


def test_mark_done_asks_for_the_result_then_resumes_the_run(django_user_model: Any) -> None:
    effect = _parked(django_user_model.objects.create_user("alice"))
    client = _staff(django_user_model, "view_tooleffect", "change_tooleffect")
    form = client.post(URL, {"action": "mark_effects_done", "_selected_action": [effect.pk]}).content.decode()
    assert 'name="result"' in form and "send_mail" in form and HOSTILE not in form
    assert ToolEffect.objects.get(pk=effect.pk).status == "unknown"  # nothing happens before the result is given
    response = client.post(URL, {"action": "mark_effects_done", "_selected_action": [effect.pk], "post": "yes",
                                 "result": "sent by hand"}, follow=True)
    assert any("1 effect(s) marked done" in str(message) for message in response.context["messages"])
    effect.refresh_from_db()
    assert (effect.status, effect.result, str(effect.resolved_by)) == ("completed", {"text": "sent by hand"}, "clerk")
    run = RobotResult.objects.get(pk=effect.result_pk)
    assert run.status == Status.COMPLETED  # queued again, and the sync executor ran it


def test_retry_resumes_the_run_and_reports_what_it_could_not_resolve(django_user_model: Any) -> None:
    alice = django_user_model.objects.create_user("alice")
    effect, done = _parked(alice), _parked(alice, tool="charge")
    ToolEffect.objects.filter(pk=done.pk).update(status=ToolEffect.Status.COMPLETED)
    client = _staff(django_user_model, "view_tooleffect", "change_tooleffect")
    response = client.post(URL, {"action": "retry_effects", "_selected_action": [effect.pk, done.pk]}, follow=True)
    texts = [str(message) for message in response.context["messages"]]
    assert "1 effect(s) will be retried." in texts and any("not of unknown outcome" in text for text in texts)
    assert ToolEffect.objects.get(pk=effect.pk).status == "retry"
    assert RobotResult.objects.get(pk=effect.result_pk).status == Status.COMPLETED
