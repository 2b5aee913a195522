"""``manage.py robotlab_prune --older-than 90d``: delete old threads with their results and events."""

from __future__ import annotations

from typing import TypedDict, Unpack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.conf import app_settings
from robotlab_django.privacy.retention import parse_age, prune_threads


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    older_than: str | None
    dry_run: bool
    batch_size: int


class Command(BaseCommand):
    """Retention: delete threads not updated for longer than an age."""

    help = ("Delete threads not updated for longer than --older-than (e.g. 90d, 12h, 2w; default "
            "ROBOTLAB['RETENTION_DAYS'] days), with all their results and stream events.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("--older-than", help="The age: a number with s, m, h, d or w (a bare number is days).")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")
        parser.add_argument("--batch-size", type=int, default=500, help="Threads deleted per transaction.")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Parse the age, prune, and report the counts."""
        age_text = options["older_than"]
        if age_text is None:
            days = app_settings.RETENTION_DAYS
            if days is None:
                raise CommandError("Give --older-than (for example --older-than 90d), or set "
                                   "ROBOTLAB['RETENTION_DAYS'].")
            age_text = str(days)
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        try:
            age = parse_age(age_text)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        report = prune_threads(age, dry_run=options["dry_run"], batch_size=options["batch_size"])
        verb = "Would delete" if report.dry_run else "Deleted"
        self.stdout.write(f"{verb} {report.threads} thread(s), {report.results} result(s) and {report.events} "
                          f"event(s) not updated since {report.cutoff:%Y-%m-%d %H:%M:%S %Z}.")
