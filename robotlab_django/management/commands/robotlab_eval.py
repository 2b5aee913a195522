"""``manage.py robotlab_eval <robot> --set <name>``: replay an eval set against a robot version, score it, gate CI."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict, Unpack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.evals.cases import CaseFileError, load_yaml
from robotlab_django.evals.eval_runs import format_table, run_eval
from robotlab_django.models import EvalSet, RobotVersion
from robotlab_django.registry import registry
from robotlab_django.versions.choice import NoSuchVersionError, resolve

#: The exit status of a run whose score is under ``--threshold``.
UNDER_THRESHOLD = 3


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    robot: str
    version: str
    eval_set: str | None
    load: Path | None
    concurrency: int
    offline: bool
    threshold: float | None
    timeout: float


class Command(BaseCommand):
    """Replay an eval set's cases against a version of a robot, store the scored EvalRun, print a table."""

    help = ("Replay the cases of an eval set against a robot version (live through the app's executor, or "
            "--offline from each case's recorded model outputs), store the scored EvalRun and print a table. "
            f"Exits with status {UNDER_THRESHOLD} when the score is under --threshold.")

    def add_base_argument(self, parser: CommandParser, *args: str, **kwargs: Any) -> None:  # argparse's keywords
        """Django's base options, but ``--version`` names the robot version here, not Django's."""
        if "--version" not in args:
            super().add_base_argument(parser, *args, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("robot", help="A registered robot's name.")
        parser.add_argument("--version", default="current",
                            help="A version number (3 or v3), a label (production, canary) or 'current' (the "
                                 "default; the robot's code when it has no versions).")
        parser.add_argument("--set", dest="eval_set", help="The eval set's name.")
        parser.add_argument("--load", type=Path, help="A YAML file of cases to load into its set first.")
        parser.add_argument("--concurrency", type=int, default=1, help="Cases run at once (default 1).")
        parser.add_argument("--offline", action="store_true",
                            help="Replay each case's recorded model outputs instead of calling the model.")
        parser.add_argument("--threshold", type=float, default=None,
                            help=f"Exit with status {UNDER_THRESHOLD} when the score (0-1) is under it.")
        parser.add_argument("--timeout", type=float, default=300.0, help="Seconds to wait for each live case.")

    def _version(self, robot: str, name: str) -> RobotVersion | None:
        try:
            return resolve(robot, name)
        except NoSuchVersionError as exc:
            if name == "current" and not RobotVersion.objects.filter(robot_name=robot, is_current=True).exists():
                return None  # no current version: the robot's code
            raise CommandError(str(exc)) from exc

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Load, run, print; raise under the threshold."""
        robot = options["robot"]
        if robot not in registry.names():
            raise CommandError(f"No robot is registered as {robot!r}.")
        set_name = options["eval_set"]
        if options["load"] is not None:
            try:
                loaded, count = load_yaml(options["load"])
            except (OSError, CaseFileError) as exc:
                raise CommandError(f"{options['load']}: {exc}") from exc
            self.stdout.write(f"Loaded {count} case(s) into {loaded.name!r}.")
            set_name = set_name or loaded.name
        if not set_name:
            raise CommandError("Name the eval set: --set <name> (or --load a YAML file).")
        eval_set = EvalSet.objects.filter(name=set_name).first()
        if eval_set is None:
            raise CommandError(f"No eval set is named {set_name!r}.")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be 1 or more.")
        version = self._version(robot, str(options["version"]))
        eval_run = run_eval(robot, eval_set, version, offline=options["offline"],
                            concurrency=options["concurrency"], timeout=options["timeout"])
        self.stdout.write(f"Eval run {eval_run.pk}: {robot} at {version or 'its code'} on {eval_set.name}"
                          f"{' (offline)' if eval_run.offline else ''}")
        self.stdout.write(format_table(eval_run))
        threshold = options["threshold"]
        if threshold is not None and (eval_run.score or 0.0) < threshold:
            raise CommandError(f"The score {eval_run.score or 0:.3f} is under the threshold {threshold}.",
                               returncode=UNDER_THRESHOLD)
