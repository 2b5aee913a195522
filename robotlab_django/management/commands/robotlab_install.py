"""``manage.py robotlab_install``: set a project up for RobotLab (the Rails ``robot_lab:install``)."""

from __future__ import annotations

from typing import TypedDict, Unpack

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.conf import app_settings
from robotlab_django.scaffolding.render import (
    AppTarget,
    PlannedFile,
    ScaffoldError,
    describe,
    has_pytest_config,
    render,
    resolve_app,
)
from robotlab_django.scaffolding.render import write_files as write

#: The app created when ``--app`` is not given.
DEFAULT_APP = "ai"


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    app: str
    models: bool
    skip_job: bool
    force: bool
    dry_run: bool


class Command(BaseCommand):
    """Create (or complete) an app with ``robots/``, ``tools/`` and ``jobs/`` packages."""

    help = ("Set up RobotLab: an app with robots/, tools/, jobs/ and tests/ packages (created when missing), "
            "the generic robot job, optionally copies of the models, and a pytest.ini for the generated tests. "
            "Nothing is overwritten without --force.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("--app", default=DEFAULT_APP,
                            help=f"The app to set up, created in the project when missing (default: {DEFAULT_APP}).")
        parser.add_argument("--models", action="store_true",
                            help="Also write models.py and admin.py with subclasses of RobotLab's abstract models.")
        parser.add_argument("--skip-job", action="store_true", help="Do not write the generic robot job.")
        parser.add_argument("--force", action="store_true", help="Overwrite files that exist with other content.")
        parser.add_argument("--dry-run", action="store_true", help="List the files without writing them.")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Plan the files, write them (all or nothing) and print the next steps."""
        root = app_settings.project_root
        try:
            app = resolve_app(options["app"], root)
        except ScaffoldError as exc:
            raise CommandError(str(exc)) from exc
        files = self._files(app, options)
        pytest_config = has_pytest_config(root)
        if pytest_config is None and app_settings.settings_module:
            files.append(PlannedFile(root / "pytest.ini", render("pytest.ini", {
                "settings_module": app_settings.settings_module}), keep_existing=True))
        try:
            outcomes = write(files, root=root, force=options["force"], dry_run=options["dry_run"])
        except ScaffoldError as exc:
            raise CommandError(str(exc)) from exc
        if options["dry_run"]:
            self.stdout.write("Dry run: nothing was written. The command would write:")
            self.stdout.write("\n".join(describe(outcomes, root)))
            return
        self.stdout.write("\n".join(describe(outcomes, root)))
        if pytest_config is not None and "DJANGO_SETTINGS_MODULE" not in (root / pytest_config).read_text("utf-8"):
            self.stdout.write(f"  pytest is configured in {pytest_config}: set DJANGO_SETTINGS_MODULE there to run "
                              "the generated tests.")
        self.stdout.write(self.style.SUCCESS("RobotLab installed successfully!"))
        self.stdout.write(self._next_steps(app, options))

    def _files(self, app: AppTarget, options: Options) -> list[PlannedFile]:
        context = {"app": app, "config_class": "".join(part.capitalize() for part in app.label.split("_")) + "Config"}
        base = app.path
        files = []
        if not app.installed:
            files += [PlannedFile(base / "__init__.py", render("app_init.py", context), keep_existing=True),
                      PlannedFile(base / "apps.py", render("apps.py", context), keep_existing=True),
                      PlannedFile(base / "migrations" / "__init__.py", "", keep_existing=True)]
        files += [
            PlannedFile(base / "robots" / "__init__.py", render("robots_init.py", context), keep_existing=True),
            PlannedFile(base / "tools" / "__init__.py", render("tools_init.py", context), keep_existing=True),
            PlannedFile(base / "tests" / "__init__.py", "", keep_existing=True),
            PlannedFile(base / "tests" / "robots" / "__init__.py", "", keep_existing=True),
        ]
        if not options["skip_job"]:
            files += [PlannedFile(base / "jobs" / "__init__.py", render("jobs_init.py", context), keep_existing=True),
                      PlannedFile(base / "jobs" / "robot_run_job.py", render("robot_run_job.py", context))]
        if options["models"]:
            if app.installed and not (base / "migrations" / "__init__.py").exists():
                files.append(PlannedFile(base / "migrations" / "__init__.py", "", keep_existing=True))
            files += [PlannedFile(base / "models.py", render("models.py", context)),
                      PlannedFile(base / "admin.py", render("admin.py", context))]
        return files

    def _next_steps(self, app: AppTarget, options: Options) -> str:
        missing = [name for name in ("robotlab_django", app.name) if not apps.is_installed(name)]
        lines = ["", "Settings (settings.py):"]
        if missing:
            lines.append(f"    INSTALLED_APPS += {missing!r}")
        lines += ["    ROBOTLAB = {",
                  '        "DEFAULT_MODEL": "openai/gpt-4o-mini",  # any litellm model; keys stay in the environment',
                  '        # "LLM": "robotlab.testing.DemoLLM",  # or: an offline demo model, no key needed']
        if options["models"]:
            lines += [f'        "THREAD_MODEL": "{app.label}.Thread",',
                      f'        "RESULT_MODEL": "{app.label}.RobotResult",',
                      f'        "EVENT_MODEL": "{app.label}.RunEvent",',
                      f'        "STEP_MODEL": "{app.label}.RunStep",',
                      f'        "SPAN_MODEL": "{app.label}.RunSpan",']
        lines += ["    }", "", "Next steps:"]
        steps = []
        if missing:
            steps.append(f"Add {', '.join(missing)} to INSTALLED_APPS (the settings above)")
        if options["models"]:
            steps.append(f"Create the migration of your models: python manage.py makemigrations {app.label}")
        steps += [
            "Run migrations: python manage.py migrate",
            "Configure your LLM: set ROBOT_LAB_MODEL (or ROBOTLAB['DEFAULT_MODEL']) and the provider's API key "
            "(OPENAI_API_KEY, ANTHROPIC_API_KEY, ...) in the environment",
            f"Generate your first robot: python manage.py startrobot MyRobot --app {app.label}",
            f"Run its tests: python manage.py test {app.name} (or pytest {app.name.replace('.', '/')}, after "
            "pip install \"robotlab-py[django,test]\")",
        ]
        if not options["skip_job"]:
            steps.append(f"Run robots as jobs via robot_run_job ({app.name.replace('.', '/')}/jobs/robot_run_job.py)")
        lines += [f"  {number}. {step}" for number, step in enumerate(steps, start=1)]
        return "\n".join(lines)
