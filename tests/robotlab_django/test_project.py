"""A fresh Django project: install, scaffold, migrate, run the generated tests, run a robot, see it in the admin.

Every step runs in a subprocess, as a user would run it, with no provider key in the environment, importing
robotlab from this checkout (``PYTHONPATH``), whatever checkout the virtual environment was installed from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.endswith("_API_KEY") and not key.startswith(("ROBOT_LAB_", "ROBOTLAB_", "DJANGO_", "PYTEST"))}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(ROOT)  # this checkout's robotlab, not an editable install's
    return env


def _run(args: list[str], cwd: Path, *, ok: bool = True) -> str:
    process = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    output = process.stdout + process.stderr
    if ok:
        assert process.returncode == 0, f"{' '.join(args)} failed:\n{output}"
    return output


def _manage(project: Path, *args: str) -> str:
    return _run([sys.executable, "manage.py", *args], project)


def _new_project(tmp_path: Path) -> Path:
    project = tmp_path / "site"
    project.mkdir()
    _run([sys.executable, "-m", "django", "startproject", "proj", "."], project)
    return project


def _add_settings(project: Path, text: str) -> None:
    with (project / "proj" / "settings.py").open("a") as handle:
        handle.write("\n" + textwrap.dedent(text))


FIRST_RUN = """
from robotlab.testing import FakeLLM, text
from robotlab_django import services
row = services.run_robot("s-1", "support", "Where is my order?",
                         llm=FakeLLM([text("It ships today.", usage=(120, 30), cost=0.0025)]))
print("RUN", row.status, row.sequence_number, row.input_tokens, row.output_tokens, row.cost)
"""

SECOND_RUN = """
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from robotlab.testing import FakeLLM, text
from robotlab_django import services
llm = FakeLLM([text("You asked about your order.", usage=(200, 10), cost=0.001)])
row = services.run_robot("s-1", "support", "What did I ask?", llm=llm)
print("HISTORY", [m["content"] for m in llm.requests[0].messages[1:]])
setup_test_environment()
admin = get_user_model().objects.create_superuser("admin", "admin@example.com", "pw")
client = Client()
client.force_login(admin)
results = client.get("/admin/robotlab/robotresult/").content.decode()
threads = client.get("/admin/robotlab/thread/").content.decode()
print("ADMIN", "$0.003500" in threads, "Totals of these results: 2 runs, 320 input tokens, 40 output tokens" in results,
      "$0.002500" in results, "It ships today." in client.get(
          f"/admin/robotlab/thread/{row.thread_id}/transcript/").content.decode())
"""


def test_fresh_project_install_scaffold_migrate_test_and_admin(tmp_path: Path) -> None:
    project = _new_project(tmp_path)
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django"]\n')
    out = _manage(project, "robotlab_install")
    assert "RobotLab installed successfully!" in out and "INSTALLED_APPS += ['ai']" in out
    _add_settings(project, 'INSTALLED_APPS += ["ai"]\n')
    assert "robot 'support'" not in out
    assert "Robot 'support' (SupportRobot) written." in _manage(project, "startrobot", "Support")
    assert "Job 'support_job'" in _manage(project, "startrobotjob", "Support")
    check = _manage(project, "check")
    assert "robotlab.W002" in check and "robotlab.E" not in check  # no key: warned, not an error
    _manage(project, "migrate")
    assert "No changes detected" in _manage(project, "makemigrations", "--check", "--dry-run")
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "ai"], project)
    assert "8 passed" in tests, tests
    assert "warning" not in tests.lower(), tests  # issue 17: no pytest-asyncio deprecation warning
    django_tests = _manage(project, "test", "ai")  # issue 17 (3): Django's runner runs them too
    assert "Ran 8 tests" in django_tests and "OK" in django_tests, django_tests
    assert "RUN completed 1 120 30 0.00250000" in _manage(project, "shell", "-c", FIRST_RUN)
    second = _manage(project, "shell", "-c", SECOND_RUN)  # a new process resumes the conversation
    assert "HISTORY ['Where is my order?', 'It ships today.', 'What did I ask?']" in second
    assert "ADMIN True True True True" in second


def test_fresh_project_with_its_own_models(tmp_path: Path) -> None:
    project = _new_project(tmp_path)
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django"]\nROBOTLAB = {"LLM": "robotlab.testing.DemoLLM"}\n')
    out = _manage(project, "robotlab_install", "--app", "chat", "--models")
    assert '"THREAD_MODEL": "chat.Thread"' in out
    _add_settings(project, """
        INSTALLED_APPS += ["chat"]
        ROBOTLAB.update(THREAD_MODEL="chat.Thread", RESULT_MODEL="chat.RobotResult", EVENT_MODEL="chat.RunEvent",
                        STEP_MODEL="chat.RunStep", SPAN_MODEL="chat.RunSpan")
    """)
    _manage(project, "startrobot", "Support", "--app", "chat")
    _manage(project, "startrobotjob", "Support", "--app", "chat")
    _manage(project, "makemigrations", "chat")
    _manage(project, "migrate")
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "chat"], project)
    assert "8 passed" in tests, tests
    script = """
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from chat.models import RobotResult
from robotlab_django import services
row = services.run_robot("s-1", "support", "Hello")
setup_test_environment()
client = Client()
client.force_login(get_user_model().objects.create_superuser("admin", "a@example.com", "pw"))
page = client.get("/admin/chat/robotresult/")
print("OWN", type(row).__module__, RobotResult.objects.count(), page.status_code, "offline demo model" in
      client.get(f"/admin/chat/thread/{row.thread_id}/transcript/").content.decode(), "STEPS", row.steps.exists(),
      "checkpointed LLM and tool calls" in client.get(f"/admin/chat/robotresult/{row.pk}/change/").content.decode())
"""
    assert "OWN chat.models 1 200 True STEPS True True" in _manage(project, "shell", "-c", script)


def test_a_startapp_app_runs_its_generated_tests_with_both_runners(tmp_path: Path) -> None:
    """Issue 17 (3): startapp's tests.py and the generated tests/ package cannot both exist."""
    project = _new_project(tmp_path)
    _manage(project, "startapp", "shop")
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django", "shop"]\n')
    assert "remove    shop/tests.py" in _manage(project, "robotlab_install", "--app", "shop")
    _manage(project, "startrobot", "Support", "--app", "shop")
    django_tests = _manage(project, "test", "shop")
    assert "Ran 5 tests" in django_tests and "OK" in django_tests, django_tests
    tests = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "shop"], project)
    assert "5 passed" in tests, tests


SHOP_MODELS = '''
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class Order(models.Model):
    class Status(models.TextChoices):
        NEW = "new", "New"
        SHIPPED = "shipped", "Shipped"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    number = models.CharField(max_length=12, unique=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.NEW)
    total = models.DecimalField(max_digits=8, decimal_places=2, default=0)
    team = models.CharField(max_length=20, blank=True, default="")
    secret = models.CharField(max_length=40, blank=True, default="")

    def __str__(self):
        return self.number

    def clean(self):
        if self.status == self.Status.SHIPPED and not self.total:
            raise ValidationError({"total": "A shipped order needs a total."})
'''

# makemigrations and migrate, then four runs, each one model step calling tools (with our ids) and one answering:
# alice through the app (the thread's owner is the run's user), bob, carol (a scope by her groups) and alice again
# through robot.run(deps=RunDeps(...)). It prints what each call returned and what the database holds after.
MODEL_TOOLS_RUNS = """
import importlib, json
from django.contrib.auth.models import Group, Permission, User
from django.core.management import call_command
call_command("makemigrations", "shop", verbosity=0)
importlib.invalidate_caches()
call_command("migrate", verbosity=0)
import robotlab
from robotlab.testing import FakeLLM, text, tool_calls
from robotlab_django import RunDeps, services
from robotlab_django.registry import register_robot
from robotlab_django.tools import model_tools
from shop.models import Order

def perms(*names):
    return Permission.objects.filter(content_type__app_label="shop", codename__in=names)

alice, bob, carol = (User.objects.create_user(name) for name in ("alice", "bob", "carol"))
alice.user_permissions.add(*perms("add_order", "change_order"))  # no view_order: her own rows only
north = Group.objects.create(name="north")
north.permissions.add(*perms("view_order"))
carol.groups.add(north)
a1 = Order.objects.create(owner=alice, number="A-1", total="12.50", team="north")
a2 = Order.objects.create(owner=alice, number="A-2", team="south", secret="alice-secret")
b1 = Order.objects.create(owner=bob, number="B-1", total="7.00", team="north", secret="bob-secret")
FIELDS = ["number", "status", "total", "team"]

@register_robot(name="orders")
def orders(**options):
    return robotlab.build(name="orders", system_prompt="You help the user with their orders.",
                          local_tools=model_tools(Order, fields=FIELDS, owner_field="owner", write=True), **options)

def results(llm):
    return {m["tool_call_id"]: m["content"] for m in llm.requests[-1].messages if m["role"] == "tool"}

def script(*calls):
    return FakeLLM([tool_calls(*calls), text("Done.")])

facts = {}
llm = script(("search_order", {}, "search"), ("get_order", {"id": b1.pk}, "bobs"),
             ("search_order", {"secret": "bob-secret"}, "secret_filter"))
row = services.run_robot(None, "orders", "Which orders do I have?", user=alice, llm=llm)
facts["app_run"] = [row.status, row.reply]
facts["alice"] = results(llm)

before = Order.objects.count()
llm = script(("create_order", {"number": "B-2", "total": "5.00"}, "create"))
robotlab.build(name="orders", local_tools=model_tools(Order, fields=FIELDS, owner_field="owner", write=True),
               llm=llm).run("Order something", deps=RunDeps(user=bob))
facts["bob"] = results(llm)
facts["bob_created"] = [Order.objects.count() - before, Order.objects.filter(number="B-2").exists()]

teams = model_tools(Order, fields=FIELDS, name="team_order",
                    scope=lambda rows, user: rows.filter(team__in=user.groups.values_list("name", flat=True)))
llm = script(("search_team_order", {}, "team"), ("get_team_order", {"id": a2.pk}, "other_team"))
robotlab.build(name="teams", local_tools=teams, llm=llm).run("Our team's orders?", deps=RunDeps(user=carol))
facts["carol"] = results(llm)

llm = script(("update_order", {"id": a2.pk, "secret": "leaked"}, "write_secret"),
             ("update_order", {"id": a2.pk, "status": "shipped"}, "clean"),
             ("create_order", {"number": "A-1"}, "unique"),
             ("update_order", {"id": b1.pk, "total": "0.01"}, "bobs_row"),
             ("update_order", {"id": a1.pk, "status": "shipped"}, "ok"))
robotlab.build(name="orders", local_tools=model_tools(Order, fields=FIELDS, owner_field="owner", write=True),
               llm=llm).run("Ship my orders", deps=RunDeps(user=alice))
facts["writes"] = results(llm)
facts["rows"] = {o.number: [o.owner.username, o.status, str(o.total), o.secret]
                 for o in Order.objects.select_related("owner").order_by("number")}
print("FACTS " + json.dumps(facts))
"""


def test_model_tools_in_a_fresh_project_act_under_the_runs_user(tmp_path: Path) -> None:
    """Issue 27: model tools on a model of the project's own, with an owner, for alice, bob and carol.

    Alice's run sees only her rows; bob's create without ``add`` is refused with nothing written; a ``scope``
    callable restricts rows; a field not listed can be neither filtered on nor written; ``full_clean`` errors reach
    the model as text (and write nothing).
    """
    project = _new_project(tmp_path)
    (project / "shop").mkdir()
    (project / "shop" / "__init__.py").write_text("")
    (project / "shop" / "models.py").write_text(SHOP_MODELS)
    _add_settings(project, 'INSTALLED_APPS += ["robotlab_django", "shop"]\n')
    out = _manage(project, "shell", "-c", MODEL_TOOLS_RUNS)
    facts = json.loads(out.split("FACTS ", 1)[1].splitlines()[0])
    assert facts["app_run"] == ["completed", "Done."]
    alice, bob, carol, writes = facts["alice"], facts["bob"], facts["carol"], facts["writes"]
    # alice's app run (her thread) sees her two rows, not bob's, and no unlisted field
    seen = json.loads(alice["search"])
    assert seen["total"] == 2 and [row["number"] for row in seen["rows"]] == ["A-1", "A-2"]
    assert "secret" not in alice["search"]
    assert alice["bobs"] == "Error (get_order): there is no order with id 3 among the orders you may see"
    # a field not listed: no filter on it, no write of it
    assert alice["secret_filter"].startswith("Error (search_order): unknown filter 'secret': the filters are number,")
    assert "bob-secret" not in json.dumps(facts["alice"])
    assert writes["write_secret"] == ("Error (update_order): unknown field 'secret': the fields of orders you may "
                                      "set are number, status, total, team")
    # bob may not add orders: refused in words, nothing written
    assert bob["create"] == ("Error (create_order): refused: you may not add orders (this needs the permission "
                             "shop.add_order); nothing was changed")
    assert facts["bob_created"] == [0, False]
    # carol's scope (her groups' teams) across owners, and nothing outside it
    team = json.loads(carol["team"])
    assert team["total"] == 2 and [row["number"] for row in team["rows"]] == ["A-1", "B-1"]
    assert carol["other_team"] == "Error (get_team_order): there is no order with id 2 among the orders you may see"
    # full_clean's errors (the model's clean(), a unique field) reach the model as text; other rows stay alice's
    assert writes["clean"] == "Error (update_order): not saved: total: A shipped order needs a total."
    assert writes["unique"] == "Error (create_order): not saved: number: Order with this Number already exists."
    assert writes["bobs_row"] == "Error (update_order): there is no order with id 3 among the orders you may see"
    assert json.loads(writes["ok"])["status"] == "shipped"  # a write she may make goes through
    assert facts["rows"] == {"A-1": ["alice", "shipped", "12.50", ""], "A-2": ["alice", "new", "0.00", "alice-secret"],
                             "B-1": ["bob", "new", "7.00", "bob-secret"]}
