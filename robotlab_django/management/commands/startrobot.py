"""``manage.py startrobot NAME``: write a robot, its test and its tool stubs (the Rails ``robot_lab:robot``)."""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict, Unpack

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.conf import app_settings
from robotlab_django.registry import UnknownRobotError, registry
from robotlab_django.scaffolding import naming
from robotlab_django.scaffolding.render import (
    AppTarget,
    PlannedFile,
    ScaffoldError,
    describe,
    find_robot_apps,
    py_literal,
    render,
    resolve_app,
    write_files,
)


def choose_app(name: str | None, root: Path) -> AppTarget:
    """The app named ``name``, or the project's only app with a ``robots`` package.

    Raises:
        CommandError: the app is missing, or several apps could be meant.
    """
    try:
        if name:
            return resolve_app(name, root, must_exist=True)
    except ScaffoldError as exc:
        raise CommandError(str(exc)) from exc
    candidates = find_robot_apps(root)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise CommandError("No app of this project has a robots package. Run 'python manage.py robotlab_install' "
                           "first, or pass --app.")
    labels = ", ".join(sorted(candidate.label for candidate in candidates))
    raise CommandError(f"Several apps have a robots package ({labels}); choose one with --app.")


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    name: str
    app: str | None
    description: str | None
    routing: bool
    tools: list[str]
    template: bool
    force: bool
    dry_run: bool


class Command(BaseCommand):
    """Write ``<app>/robots/<name>_robot.py`` and ``<app>/tests/robots/test_<name>_robot.py``."""

    help = ("Write a robot: <app>/robots/<name>_robot.py, its test (passes offline on FakeLLM), a stub per --tools "
            "entry and, with --template, a prompt template. Support, support and SupportRobot name the same "
            "robot. Nothing is overwritten without --force.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("name", help="The robot's name, e.g. Support (class SupportRobot, robot 'support').")
        parser.add_argument("--app", help="The app to write into (default: the only app with a robots package).")
        parser.add_argument("--description", help="What the robot does (default: 'A helpful <Name> robot').")
        parser.add_argument("--routing", action="store_true",
                            help="A routing robot that answers billing, technical or general.")
        parser.add_argument("--tools", nargs="*", default=[], metavar="TOOL",
                            help="Tools to give the robot; a stub <app>/tools/<tool>.py is written for each "
                                 "missing one.")
        parser.add_argument("--template", action="store_true",
                            help="Keep the prompt in a template file, <app>/prompts/<name>.md, with YAML front "
                                 "matter.")
        parser.add_argument("--force", action="store_true", help="Overwrite files that exist with other content.")
        parser.add_argument("--dry-run", action="store_true", help="List the files without writing them.")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Validate the names, plan the files and write them (all or nothing)."""
        try:
            robot = naming.robot_name(options["name"])
            tools = list(dict.fromkeys(naming.tool_name(entry) for raw in options["tools"]
                                       for entry in raw.split(",") if entry.strip()))
        except naming.InvalidNameError as exc:
            raise CommandError(str(exc)) from exc
        root = app_settings.project_root
        app = choose_app(options["app"], root)
        self._check_free(robot, app, force=options["force"])
        description = options["description"] or f"A helpful {robot.title} robot"
        context = {"app": app, "robot": robot, "tools": tools, "tool_imports": sorted(tools),
                   "routing": options["routing"], "template": options["template"],
                   "description": py_literal(description)}
        base = app.path
        files = [
            PlannedFile(base / "robots" / "__init__.py", render("robots_init.py", context), keep_existing=True),
            PlannedFile(base / "robots" / f"{robot.module}.py",
                        render("routing_robot.py" if options["routing"] else "robot.py", context)),
            PlannedFile(base / "tests" / "__init__.py", "", keep_existing=True),
            PlannedFile(base / "tests" / "robots" / "__init__.py", "", keep_existing=True),
            PlannedFile(base / "tests" / "robots" / f"test_{robot.module}.py", render("test_robot.py", context)),
        ]
        if tools:
            files.append(PlannedFile(base / "tools" / "__init__.py", render("tools_init.py", context),
                                     keep_existing=True))
            files += [PlannedFile(base / "tools" / f"{tool}.py", render("tool.py", {"tool": tool}), keep_existing=True)
                      for tool in tools]
        if options["template"]:
            front = yaml.safe_dump({"description": description}, allow_unicode=True, sort_keys=False)
            files.append(PlannedFile(base / "prompts" / f"{robot.robot_name}.md",
                                     render("prompt.md", {**context, "front_matter": front})))
        try:
            outcomes = write_files(files, root=root, force=options["force"], dry_run=options["dry_run"])
        except ScaffoldError as exc:
            raise CommandError(str(exc)) from exc
        if options["dry_run"]:
            self.stdout.write("Dry run: nothing was written. The command would write:")
        self.stdout.write("\n".join(describe(outcomes, root)))
        if not options["dry_run"]:
            test_path = (base / "tests" / "robots" / f"test_{robot.module}.py").relative_to(root)
            self.stdout.write(self.style.SUCCESS(f"Robot '{robot.robot_name}' ({robot.class_name}) written."))
            self.stdout.write(f"  Run its tests: pytest {test_path}\n"
                              f"  Run it on a thread: robotlab_django.services.run_robot(\"session-1\", "
                              f"\"{robot.robot_name}\", \"Hello\")")

    def _check_free(self, robot: naming.RobotName, app: AppTarget, *, force: bool) -> None:
        """Refuse a name another module already registered (unless ``--force``)."""
        try:
            existing = registry.get(robot.robot_name)
        except UnknownRobotError:
            return
        mine = f"{app.name}.robots.{robot.module}.{robot.class_name}"
        if existing.origin != mine and not force:
            raise CommandError(f"A robot named '{robot.robot_name}' is already registered by {existing.origin}; "
                               "choose another name (or use --force).")
