"""``manage.py robotlab_rollups``: recompute the daily usage rollups from the result rows."""

from __future__ import annotations

import datetime as dt
from typing import TypedDict, Unpack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.accounting.rollups import rebuild


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    since: str | None


class Command(BaseCommand):
    """Recompute the usage rollups (after rows were written by ``bulk_create`` or raw SQL)."""

    help = ("Recompute the daily usage rollups (runs, tokens and cost per day, robot, model and user) from the "
            "result rows: all days, or the days from --since (YYYY-MM-DD).")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("--since", help="The first day to recompute, as YYYY-MM-DD (default: every day).")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Rebuild, and say how many rollup rows were written."""
        since = None
        if options["since"]:
            try:
                since = dt.date.fromisoformat(options["since"])
            except ValueError as exc:
                raise CommandError(f"--since must be a date as YYYY-MM-DD, got {options['since']!r}.") from exc
        written = rebuild(since=since)
        scope = f"from {since}" if since else "for every day"
        self.stdout.write(f"Rebuilt {written} usage rollup row(s) {scope}.")
