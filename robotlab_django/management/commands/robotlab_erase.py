"""``manage.py robotlab_erase --user USERNAME``: delete every row holding one user's content."""

from __future__ import annotations

from typing import TypedDict, Unpack

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.privacy.erasure import BATCH_SIZE, STOP_TIMEOUT, erase_user


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    user: str
    dry_run: bool
    batch_size: int
    stop_timeout: float


class Command(BaseCommand):
    """Erasure: a user's threads with their results, stream events and checkpointed steps (runs in flight cancelled)."""

    help = ("Cancel the user's runs in flight, then delete every thread the user owns, with all its results, "
            "stream events and checkpointed steps (the user account itself stays). --dry-run counts first.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("--user", required=True, metavar="USERNAME",
                            help="The user whose content goes (their username, the user model's USERNAME_FIELD).")
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")
        parser.add_argument("--batch-size", type=int, default=BATCH_SIZE,
                            help=f"Threads deleted per transaction (default {BATCH_SIZE}).")
        parser.add_argument("--stop-timeout", type=float, default=STOP_TIMEOUT, metavar="SECONDS",
                            help="Seconds to wait for the user's running runs to stop after their cancel, before "
                                 f"deleting (default {STOP_TIMEOUT:g}).")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Find the user, erase (or count), and report the counts."""
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1.")
        model = get_user_model()
        field = model.USERNAME_FIELD
        user = model._default_manager.filter(**{field: options["user"]}).first()
        if user is None:
            raise CommandError(f"No user with {field} '{options['user']}'. Give the {field} exactly as stored "
                               "(it is case-sensitive).")
        report = erase_user(user, dry_run=options["dry_run"], batch_size=options["batch_size"],
                            stop_timeout=options["stop_timeout"])
        self.stdout.write(report.describe())
