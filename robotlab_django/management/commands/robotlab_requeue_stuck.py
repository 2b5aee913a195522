"""``manage.py robotlab_requeue_stuck``: re-queue (or fail) runs whose worker was lost."""

from __future__ import annotations

from typing import TypedDict, Unpack

from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.runs.control import expire_parked
from robotlab_django.runs.executor import requeue_stuck


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    lease: float | None
    dry_run: bool


class Command(BaseCommand):
    """Recovery: runs stuck ``running`` (or never picked up) past the lease go back to the executor."""

    help = ("Re-queue runs that have been running (or queued untouched) for longer than --lease seconds "
            "(default ROBOTLAB['RUN_LEASE']); runs out of attempts (ROBOTLAB['TASK_MAX_ATTEMPTS']) are "
            "marked failed; runs awaiting an answer longer than ROBOTLAB['ASK_TIMEOUT'] are failed (AskTimeout). "
            "Run it from cron or celery beat.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("--lease", type=float, help="Seconds after which a run counts as stuck.")
        parser.add_argument("--dry-run", action="store_true", help="List what would happen; change nothing.")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Find the stuck runs, re-queue or fail them, and report."""
        lease = options["lease"]
        if lease is not None and lease <= 0:
            raise CommandError("--lease must be greater than 0.")
        requeued, failed = requeue_stuck(lease=lease, dry_run=options["dry_run"])
        verb = ("Would re-queue", "would fail") if options["dry_run"] else ("Re-queued", "failed")
        self.stdout.write(f"{verb[0]} {len(requeued)} run(s) {list(requeued)}; {verb[1]} {len(failed)} "
                          f"run(s) {list(failed)}.")
        if not options["dry_run"]:
            expired = expire_parked()
            self.stdout.write(f"Failed {len(expired)} run(s) awaiting an answer past ASK_TIMEOUT {expired}.")
