"""``manage.py robotlab_token USERNAME``: issue an API token for the ACP and A2A servers."""

from __future__ import annotations

from typing import TypedDict, Unpack

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from robotlab_django.protocols.tokens import issue_token


class Options(TypedDict):
    """The options :meth:`Command.handle` reads, as its parser makes them."""

    username: str
    name: str
    days: int | None


class Command(BaseCommand):
    """Print a new API token for a user on the last line (it is stored hashed: copy it now)."""

    help = ("Create an API token for USERNAME and print it on the last line. Requests send "
            "'Authorization: Bearer <token>'. It expires after ROBOTLAB['API_TOKEN_DAYS'] days (90 by default) "
            "or --days; a password change revokes the user's tokens; revoke one in the admin.")

    def add_arguments(self, parser: CommandParser) -> None:
        """The command's options."""
        parser.add_argument("username", help="The user the token acts as (the user model's USERNAME_FIELD).")
        parser.add_argument("--name", default="", help="A label to tell the token apart in the admin.")
        parser.add_argument("--days", type=int, default=None,
                            help="Days until the token expires (default: ROBOTLAB['API_TOKEN_DAYS'], 90).")

    def handle(self, *args: str, **options: Unpack[Options]) -> None:
        """Find the user, issue the token, print it."""
        if options["days"] is not None and options["days"] < 1:
            raise CommandError(f"--days must be at least 1, not {options['days']}.")
        model = get_user_model()
        try:
            user = model.objects.get(**{model.USERNAME_FIELD: options["username"]})
        except model.DoesNotExist:
            raise CommandError(f"No user {options['username']!r}; create it first (manage.py createsuperuser "
                               "or the admin).") from None
        row, token = issue_token(user, options["name"], days=options["days"])
        expiry = f"expires {row.expires_at:%Y-%m-%d %H:%M} UTC" if row.expires_at else "never expires"
        self.stdout.write(f"Token {row.prefix}… for {user}, {expiry} (stored hashed; it is not shown again):")
        self.stdout.write(token)
