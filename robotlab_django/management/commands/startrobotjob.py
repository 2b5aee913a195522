"""``manage.py startrobotjob NAME``: write a job that runs a robot, and its test (the Rails ``robot_lab:job``)."""

from __future__ import annotations

import re
from typing import TypedDict, Unpack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.conf import app_settings
from robotlab_django.management.commands.startrobot import choose_app
from robotlab_django.scaffolding import naming
from robotlab_django.scaffolding.render import PlannedFile, ScaffoldError, describe, py_literal, render, write_files

_QUEUE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    name: str
    app: str | None
    queue: str
    force: bool
    dry_run: bool


class Command(BaseCommand):
    """Write ``<app>/jobs/<name>_job.py`` and ``<app>/tests/jobs/test_<name>_job.py``."""

    help = ("Write a job for an existing robot: <app>/jobs/<name>_job.py (run now, or enqueue through "
            "ROBOTLAB['EXECUTOR']) and its test, which runs offline on FakeLLM with the test database. "
            "Nothing is overwritten without --force.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("name", help="The robot's name, e.g. Support (the robot from 'startrobot Support').")
        parser.add_argument("--app", help="The app to write into (default: the only app with a robots package).")
        parser.add_argument("--queue", default="default", help="The job's queue (default: default).")
        parser.add_argument("--force", action="store_true",
                            help="Overwrite files that differ, and write the job even if the robot module is missing.")
        parser.add_argument("--dry-run", action="store_true", help="List the files without writing them.")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Validate, plan and write (all or nothing)."""
        try:
            robot = naming.robot_name(options["name"])
        except naming.InvalidNameError as exc:
            raise CommandError(str(exc)) from exc
        queue = options["queue"]
        if not _QUEUE.match(queue or ""):
            raise CommandError(f"'{queue}' is not a queue name: use letters, digits, '_', '-' and '.'.")
        root = app_settings.project_root
        app = choose_app(options["app"], root)
        robot_file = app.path / "robots" / f"{robot.module}.py"
        if not robot_file.is_file() and not options["force"]:
            raise CommandError(f"No robot module {robot_file.relative_to(root)}: run 'python manage.py startrobot "
                               f"{robot.class_name} --app {app.label}' first (or use --force to write the job anyway).")
        job_module = f"{robot.robot_name}_job"
        context = {"app": app, "robot": robot, "job_module": job_module, "job_name": job_module,
                   "job_class": "".join(part.capitalize() for part in job_module.split("_")),
                   "queue": py_literal(queue)}
        base = app.path
        files = [
            PlannedFile(base / "jobs" / "__init__.py", render("jobs_init.py", context), keep_existing=True),
            PlannedFile(base / "jobs" / f"{job_module}.py", render("job.py", context)),
            PlannedFile(base / "tests" / "__init__.py", "", keep_existing=True),
            PlannedFile(base / "tests" / "jobs" / "__init__.py", "", keep_existing=True),
            PlannedFile(base / "tests" / "jobs" / f"test_{job_module}.py", render("test_job.py", context)),
        ]
        try:
            outcomes = write_files(files, root=root, force=options["force"], dry_run=options["dry_run"])
        except ScaffoldError as exc:
            raise CommandError(str(exc)) from exc
        if options["dry_run"]:
            self.stdout.write("Dry run: nothing was written. The command would write:")
        self.stdout.write("\n".join(describe(outcomes, root)))
        if not options["dry_run"]:
            self.stdout.write(self.style.SUCCESS(f"Job '{job_module}' for robot '{robot.robot_name}' written "
                                                 f"(queue {queue!r})."))
