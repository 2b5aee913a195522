"""The scaffolding commands, run in-process against a project directory in ``tmp_path``."""

from __future__ import annotations

import importlib
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from robotlab.testing import FakeLLM, text, tool_call
from robotlab_django.registry import registry


@pytest.fixture
def project(settings: Any, tmp_path: Path) -> Iterator[Path]:
    """An empty project directory (``BASE_DIR``) importable for the test."""
    settings.BASE_DIR = tmp_path
    sys.path.insert(0, str(tmp_path))
    saved = dict(registry._robots)
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [name for name, module in sys.modules.items()
                     if str(getattr(module, "__file__", "") or "").startswith(str(tmp_path))]:
            del sys.modules[name]
        registry._robots.clear()
        registry._robots.update(saved)


def _app() -> str:
    return f"app_{uuid.uuid4().hex[:8]}"


def _run(*args: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def _tree(root: Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text() for path in sorted(root.rglob("*")) if path.is_file()}


# -- robotlab_install -------------------------------------------------------------------
def test_install_creates_the_app_and_prints_next_steps(project: Path) -> None:
    app = _app()
    out = _run("robotlab_install", "--app", app)
    files = set(_tree(project))
    assert {f"{app}/__init__.py", f"{app}/apps.py", f"{app}/migrations/__init__.py", f"{app}/robots/__init__.py",
            f"{app}/tools/__init__.py", f"{app}/tests/__init__.py", f"{app}/tests/robots/__init__.py",
            f"{app}/jobs/__init__.py", f"{app}/jobs/robot_run_job.py", "pytest.ini"} == files
    assert "RobotLab installed successfully!" in out
    assert f"INSTALLED_APPS += ['{app}']" in out
    for step in (f"1. Add {app} to INSTALLED_APPS", "2. Run migrations", "3. Configure your LLM",
                 "4. Generate your first robot", f"5. Run its tests: python manage.py test {app} (or pytest {app}",
                 f"6. Run robots as jobs via robot_run_job ({app}/jobs/robot_run_job.py)"):
        assert step in out
    assert "DJANGO_SETTINGS_MODULE = tests.robotlab_django.settings" in (project / "pytest.ini").read_text()
    module = importlib.import_module(f"{app}.jobs.robot_run_job")
    assert module.robot_run_job.queue == "default" and module.robot_run_job.robot is None
    assert importlib.import_module(f"{app}.apps").__name__.endswith(".apps")


def test_install_twice_changes_nothing(project: Path) -> None:
    app = _app()
    _run("robotlab_install", "--app", app)
    before = _tree(project)
    out = _run("robotlab_install", "--app", app)
    assert _tree(project) == before
    assert "create" not in out and "unchanged" in out and "kept" in out
    assert "set DJANGO_SETTINGS_MODULE there" not in out  # issue 17: it wrote that pytest.ini itself


def test_install_replaces_the_empty_tests_module_of_startapp(project: Path) -> None:
    """Issue 17 (3): a tests/ package next to startapp's tests.py breaks ``manage.py test``."""
    from robotlab_django.scaffolding.render import STARTAPP_TESTS

    app = _app()
    (project / app).mkdir()
    (project / app / "__init__.py").write_text("")
    (project / app / "tests.py").write_text(STARTAPP_TESTS)
    out = _run("robotlab_install", "--app", app)
    assert f"remove    {app}/tests.py" in out
    assert not (project / app / "tests.py").exists() and (project / app / "tests" / "__init__.py").is_file()


def test_install_refuses_to_shadow_a_tests_module_with_tests(project: Path) -> None:
    app = _app()
    (project / app).mkdir()
    (project / app / "__init__.py").write_text("")
    (project / app / "tests.py").write_text("def test_mine() -> None:\n    assert True\n")
    with pytest.raises(CommandError, match=rf"{app}/tests.py holds tests.*Move it to {app}/tests/test_app.py"):
        _run("robotlab_install", "--app", app)
    assert not (project / app / "tests").exists()


def test_the_test_extra_brings_what_the_generated_tests_need() -> None:
    """Issue 17 (2): ``pip install "robotlab-py[django,test]"`` is enough to run ``pytest`` on the generated tests."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {requirement.split(">")[0].split("=")[0].split("[")[0] for requirement in extras["test"]}
    assert {"pytest", "pytest-django", "pytest-asyncio"} <= names


def test_install_refuses_to_overwrite_a_changed_file(project: Path) -> None:
    app = _app()
    _run("robotlab_install", "--app", app)
    job = project / app / "jobs" / "robot_run_job.py"
    job.write_text("# mine\n")
    (project / app / "robots" / "__init__.py").unlink()
    before = _tree(project)
    with pytest.raises(CommandError, match=r"Not writing anything: .*robot_run_job.py already exist"):
        _run("robotlab_install", "--app", app)
    assert _tree(project) == before  # not even the missing robots/__init__.py was written
    out = _run("robotlab_install", "--app", app, "--force")
    assert "overwrite" in out and job.read_text() != "# mine\n"
    assert (project / app / "robots" / "__init__.py").exists()


def test_install_dry_run_writes_nothing(project: Path) -> None:
    out = _run("robotlab_install", "--app", _app(), "--dry-run")
    assert "Dry run: nothing was written" in out and "create" in out
    assert _tree(project) == {}


def test_install_skip_job_and_models(project: Path) -> None:
    app = _app()
    out = _run("robotlab_install", "--app", app, "--skip-job", "--models")
    files = set(_tree(project))
    assert f"{app}/jobs/robot_run_job.py" not in files
    assert {f"{app}/models.py", f"{app}/admin.py"} <= files
    assert "Run robots as jobs" not in out
    assert f'"THREAD_MODEL": "{app}.Thread"' in out and f"makemigrations {app}" in out
    source = (project / app / "models.py").read_text()
    assert "class RobotResult(AbstractRobotResult)" in source and "related_name=\"results\"" in source


def test_install_keeps_an_existing_pytest_configuration(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    out = _run("robotlab_install", "--app", _app())
    assert not (project / "pytest.ini").exists()
    assert "pytest is configured in pyproject.toml" in out


@pytest.mark.parametrize(("app", "message"), [
    ("my app", "not a valid app name"), ("class", "Python keyword"), ("json", "conflicts with the name of an existing"),
    ("robotlab", "lives outside the project"),
])
def test_install_bad_app_names(project: Path, app: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        _run("robotlab_install", "--app", app)
    assert _tree(project) == {}


# -- startrobot ---------------------------------------------------------------------------
def _installed(project: Path) -> str:
    app = _app()
    _run("robotlab_install", "--app", app)
    return app


@pytest.mark.parametrize("spelling", ["Support", "support", "SupportRobot"])
def test_startrobot_normalises_the_name_and_the_robot_runs(project: Path, spelling: str) -> None:
    app = _installed(project)
    out = _run("startrobot", spelling)
    assert f"{app}/robots/support_robot.py" in out and f"{app}/tests/robots/test_support_robot.py" in out
    module = importlib.import_module(f"{app}.robots.support_robot")
    source = (project / app / "robots" / "support_robot.py").read_text()
    assert "class SupportRobot" in source and 'name = "support"' in source
    assert '"A helpful Support robot"' in source and "You are a helpful Support assistant." in source
    robot = module.SupportRobot.build(llm=FakeLLM([text("Hello!")]))
    assert robot.run("hi").reply == "Hello!"
    assert registry.get("support").factory == module.SupportRobot.build
    assert "def test_robot_has_correct_name" in (project / app / "tests/robots/test_support_robot.py").read_text()


def test_startrobot_spellings_write_the_same_file(project: Path) -> None:
    app = _installed(project)
    _run("startrobot", "Support", "--app", app)
    before = _tree(project)
    out = _run("startrobot", "SupportRobot", "--app", app)
    assert _tree(project) == before and "unchanged" in out
    with pytest.raises(CommandError, match="already exist"):
        _run("startrobot", "support", "--app", app, "--description", "Something else")
    assert _tree(project) == before


@pytest.mark.parametrize(("name", "message"), [
    ("123", "not a valid robot name"), ("my-robot", "not a valid robot name"), ("class", "keyword"),
    ("Robot", "'Robot' alone"),
])
def test_startrobot_bad_names_change_nothing(project: Path, name: str, message: str) -> None:
    _installed(project)
    before = _tree(project)
    with pytest.raises(CommandError, match=message):
        _run("startrobot", name)
    assert _tree(project) == before


def test_startrobot_bad_tool_name(project: Path) -> None:
    _installed(project)
    with pytest.raises(CommandError, match="not a valid tool name"):
        _run("startrobot", "Support", "--tools", "look-up")


def test_startrobot_with_tools_description_routing_and_template(project: Path) -> None:
    app = _installed(project)
    _run("startrobot", "Billing", "--description", 'Handles "billing" & refunds\nfast', "--tools",
         "LookupOrder", "refund,lookup_order", "--template")
    module = importlib.import_module(f"{app}.robots.billing_robot")
    assert module.BillingRobot.description == 'Handles "billing" & refunds\nfast'
    robot = module.BillingRobot.build(llm=FakeLLM([tool_call("lookup_order", query="42"), text("Shipped.")]))
    assert [tool.name for tool in robot.local_tools] == ["lookup_order", "refund"]
    result = robot.run("Where is order 42?")
    assert result.reply == "Shipped." and result.tool_calls[0].content["data"].startswith("lookup_order is not")
    prompt = (project / app / "prompts" / "billing.md").read_text()
    assert prompt.startswith("---\ndescription: ") and "You are a helpful Billing assistant." in prompt
    (project / app / "tools" / "refund.py").write_text("raise SystemExit('kept as it is')\n")
    _run("startrobot", "Billing", "--tools", "refund", "--force")
    assert "kept as it is" in (project / app / "tools" / "refund.py").read_text()

    _run("startrobot", "Router", "--routing", "--app", app)
    router = importlib.import_module(f"{app}.robots.router_robot").RouterRobot
    assert router.route(router.build(llm=FakeLLM([text("Technical.")])).run("My app crashes")) == "technical"
    assert router.route("no idea") == "general"


def test_startrobot_needs_an_app(project: Path) -> None:
    with pytest.raises(CommandError, match="No app of this project has a robots package"):
        _run("startrobot", "Support")
    with pytest.raises(CommandError, match="not found"):
        _run("startrobot", "Support", "--app", "missing_app")
    _installed(project)
    _installed(project)
    with pytest.raises(CommandError, match="Several apps have a robots package"):
        _run("startrobot", "Support")


def test_startrobot_refuses_a_name_another_module_registered(project: Path) -> None:
    _installed(project)
    with pytest.raises(CommandError, match="'echo' is already registered by tests.robotlab_django"):
        _run("startrobot", "Echo")
    _run("startrobot", "Echo", "--force")


def test_startrobot_dry_run(project: Path) -> None:
    _installed(project)
    before = _tree(project)
    out = _run("startrobot", "Support", "--dry-run")
    assert "Dry run" in out and _tree(project) == before


# -- startrobotjob ------------------------------------------------------------------------
@pytest.mark.django_db
def test_startrobotjob_writes_a_job_that_runs(project: Path) -> None:
    app = _installed(project)
    _run("startrobot", "Support")
    out = _run("startrobotjob", "SupportRobot", "--queue", "ai")
    assert "Job 'support_job' for robot 'support' written (queue 'ai')" in out
    module = importlib.import_module(f"{app}.jobs.support_job")
    assert module.support_job.queue == "ai"
    row = module.support_job.run("Hello", thread="t1", llm=FakeLLM([text("Hi!")]))
    assert (row.robot_name, row.reply) == ("support", "Hi!")
    assert "def test_job_continues_the_conversation" in (project / app / "tests/jobs/test_support_job.py").read_text()


def test_startrobotjob_needs_the_robot(project: Path) -> None:
    app = _installed(project)
    before = _tree(project)
    with pytest.raises(CommandError, match="run 'python manage.py startrobot SupportRobot"):
        _run("startrobotjob", "Support")
    assert _tree(project) == before
    _run("startrobotjob", "Support", "--force")
    assert (project / app / "jobs" / "support_job.py").exists()


@pytest.mark.parametrize("queue", ["", "two words", "a/b"])
def test_startrobotjob_bad_queue(project: Path, queue: str) -> None:
    _installed(project)
    _run("startrobot", "Support")
    with pytest.raises(CommandError, match="not a queue name"):
        _run("startrobotjob", "Support", "--queue", queue)
